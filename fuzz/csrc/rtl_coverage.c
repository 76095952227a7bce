/* Block coverage of the Verilated RTL for libFuzzer.
 *
 * The rtl_parser target's C++ (the Verilated model, its runtime and the cxx bridge) is
 * compiled by g++, which has no -fsanitize-coverage=trace-pc-guard or inline 8-bit
 * counters, the two kinds libFuzzer reads. It does have trace-pc: a call to
 * __sanitizer_cov_trace_pc() at the start of every basic block. libFuzzer defines that
 * hook only to warn that it is deprecated, so the link wraps it (build.rs passes
 * --wrap=__sanitizer_cov_trace_pc) and the calls land here instead, counting each
 * block's return address (hashed) in an array in the __libfuzzer_extra_counters
 * section, which libFuzzer scans after every input as it scans its own counters. So a
 * frame that takes a new branch of an always block in the RTL is a new feature, kept in
 * the corpus.
 *
 * Built only when ROCE_FUZZ_RTL_COVERAGE=1 (see build.rs), with CXXFLAGS carrying
 * -fsanitize-coverage=trace-pc; this file itself is not instrumented (CFLAGS stay
 * empty, and the attribute below says so too).
 */
#include <stdint.h>

#define ROCE_RTL_COUNTERS 16384

__attribute__((section("__libfuzzer_extra_counters"), used))
uint8_t roce_rtl_counters[ROCE_RTL_COUNTERS];

__attribute__((no_sanitize_coverage))
void __wrap___sanitizer_cov_trace_pc(void) {
    uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    uint8_t *c = &roce_rtl_counters[(pc ^ (pc >> 14)) % ROCE_RTL_COUNTERS];
    /* Saturate: a block run 256 times is not a block never run. */
    if (*c != UINT8_MAX) {
        (*c)++;
    }
}
