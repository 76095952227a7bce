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

    /// Inputs of one clock cycle of the fast-path model (`roce_fp_top`).
    #[derive(Clone, Copy, Debug, Default)]
    struct FpIn {
        rx: AxisIn,
        tx_out_ready: bool,
        /// the 96-byte TX message descriptor, little-endian words
        txd: [u64; 12],
        txd_valid: bool,
        ackd: [u64; 2],
        ackd_valid: bool,
        cfg_wr_valid: bool,
        cfg_wr_table: u8,
        cfg_wr_index: u32,
        cfg_wr_word: u8,
        cfg_wr_data: u32,
        cfg_rd_valid: bool,
        cfg_rd_table: u8,
        cfg_rd_index: u32,
        cfg_rd_word: u8,
        ev_ready: bool,
        exc_ready: bool,
        dma_rd_req_ready: bool,
        dma_rd: AxisIn,
        /// the beat on `dma_rd` could not be read (the host's error response)
        dma_rd_err: bool,
        dma_wr_desc_ready: bool,
        dma_wr_ready: bool,
    }

    /// Outputs of the fast-path model during one clock cycle.
    #[derive(Clone, Copy, Debug, Default)]
    struct FpOut {
        rx_in_ready: bool,
        tx_out: AxisOut,
        txd_ready: bool,
        ackd_ready: bool,
        cfg_wr_ready: bool,
        cfg_rd_ready: bool,
        cfg_rdata: u32,
        cfg_rdata_valid: bool,
        /// the 64-byte event, little-endian words
        ev: [u64; 8],
        ev_valid: bool,
        exc: AxisOut,
        dma_rd_req_addr: u64,
        dma_rd_req_len: u16,
        dma_rd_req_last: bool,
        dma_rd_req_valid: bool,
        dma_rd_in_ready: bool,
        dma_wr_desc_addr: u64,
        dma_wr_desc_len: u16,
        dma_wr_desc_valid: bool,
        dma_wr: AxisOut,
        tx_bad_desc: u32,
        /// `tx_out`'s last beat aborts the frame (a DMA read error in its payload)
        tx_abort: bool,
        tx_dma_errors: u32,
        /// request packets the planner sent again (a PSN before `next_psn`)
        tx_resent: u32,
        rx_drops: u32,
        /// the receive-context cache's hits and misses
        rx_ctx_hits: u32,
        rx_ctx_misses: u32,
        /// request packets the receive path answered itself: out of sequence
        /// (dropped, one NAK per gap) and duplicate SEND/WRITE (ACKed again)
        rx_oos: u32,
        rx_dups: u32,
        tx_idle: bool,
        rx_idle: bool,
        /// descriptors the segmenter's slots hold
        tx_slots_used: u8,
    }

    /// Inputs of one clock cycle of the DCB model (`roce_dcb_top`).
    #[derive(Clone, Copy, Debug, Default)]
    struct DcbIn {
        cfg_wr_valid: bool,
        cfg_wr_addr: u8,
        cfg_wr_data: u32,
        /// the wire, into the port
        rx: AxisIn,
        /// the datapath takes received frames
        rx_out_ready: bool,
        /// frames to send, from the datapath
        tx: AxisIn,
        /// the wire takes transmitted frames
        tx_out_ready: bool,
    }

    /// Outputs of the DCB model during one clock cycle.
    #[derive(Clone, Copy, Debug, Default)]
    struct DcbOut {
        rx_in_ready: bool,
        tx_in_ready: bool,
        tx_out: AxisOut,
        rx_out: AxisOut,
        tx_room: u8,
        paused: u8,
        xoff: u8,
        announce: u8,
        pfc_take: bool,
        refresh_fire: bool,
        pause_req_valid: bool,
        pause_req_enable: u8,
        /// eight 16-bit pause times, priority 0 in the low bits
        pause_req_quanta: [u64; 2],
        add_valid: bool,
        add_prio: u8,
        add_len: u16,
        sub_valid: bool,
        sub_prio: u8,
        sub_len: u16,
        dec_valid: bool,
        dec_eligible: u8,
        dec_prio: u8,
        rx_pfc_frames: u32,
        rx_bad_mac_ctl: u32,
        rx_drops: u32,
    }

    unsafe extern "C++" {
        include!("roce-hdl-sim/csrc/dp_model.h");
        include!("roce-hdl-sim/csrc/fp_model.h");
        include!("roce-hdl-sim/csrc/dcb_model.h");

        type DpModel;

        fn new_dp_model(width: u32, trace: bool) -> Result<UniquePtr<DpModel>>;
        fn data_width(self: &DpModel) -> u32;
        fn meta_width(self: &DpModel) -> u32;
        fn reset(self: Pin<&mut DpModel>, cycles: u32);
        fn cycle(self: Pin<&mut DpModel>, input: &CycleIn, out: &mut CycleOut);
        fn open_trace(self: Pin<&mut DpModel>, path: &str) -> Result<()>;
        fn close_trace(self: Pin<&mut DpModel>);
        fn cycles(self: &DpModel) -> u64;

        type FpModel;

        fn new_fp_model(width: u32, trace: bool) -> Result<UniquePtr<FpModel>>;
        fn reset(self: Pin<&mut FpModel>, cycles: u32);
        fn cycle(self: Pin<&mut FpModel>, input: &FpIn, out: &mut FpOut);
        fn open_trace(self: Pin<&mut FpModel>, path: &str) -> Result<()>;
        fn close_trace(self: Pin<&mut FpModel>);

        type DcbModel;

        fn new_dcb_model(width: u32, trace: bool) -> Result<UniquePtr<DcbModel>>;
        fn reset(self: Pin<&mut DcbModel>, cycles: u32);
        fn cycle(self: Pin<&mut DcbModel>, input: &DcbIn, out: &mut DcbOut);
        fn open_trace(self: Pin<&mut DcbModel>, path: &str) -> Result<()>;
        fn close_trace(self: Pin<&mut DcbModel>);
    }
}
