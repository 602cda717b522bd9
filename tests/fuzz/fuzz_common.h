/*
 * fuzz_common.h — shared by the libFuzzer targets of tests/fuzz/.
 *
 * Each target defines LLVMFuzzerTestOneInput. Built with clang
 * -fsanitize=fuzzer,address,undefined (scripts/fuzz.sh, PCCL_FUZZ=ON) it is a
 * fuzzer; linked with replay_main.c it replays a corpus as an ordinary test.
 */
#ifndef PCCL_FUZZ_COMMON_H
#define PCCL_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* A property the codec must keep on every input: a violation is a finding. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) abort();                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* PCCL_FUZZ_COMMON_H */
