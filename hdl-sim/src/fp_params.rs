/// Entries of the Verilated fast path's context tables (`roce_fp_top`'s `NQP`, passed
/// to Verilator as `-GNQP`; `build.rs` includes this file). QP `qpn` lives in entry
/// `qpn mod FP_CTX_ENTRIES`, tagged by its QPN (`docs/scale.md`). As many as the fast
/// path's software model has (`roce_device`'s `FASTPATH_QPS`), so the two caches agree;
/// synthesis keeps the RTL's default (256).
pub const FP_CTX_ENTRIES: usize = 64;
