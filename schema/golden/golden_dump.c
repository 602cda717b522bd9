/*
 * golden_dump — prints what our codec encodes, for make_golden.py --crosscheck
 * (the native ctest schema_protoc_crosscheck), one "id hex" line per vector:
 *   <id> <hex>     every golden vector decoded and re-encoded by the C codec
 *   c:<id> <hex>   every sample built field by field in C (golden_samples.h)
 * Exits non-zero when our codec fails on a vector.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_pb.h"
#include "golden_samples.h"
#include "golden_vectors.h"

static void print_hex(const char *prefix, const char *id, const uint8_t *b, uint64_t n)
{
    printf("%s%s ", prefix, id);
    for (uint64_t i = 0; i < n; i++)
        printf("%02x", b[i]);
    printf("\n");
}

int main(void)
{
    static uint8_t out[1 << 16];
    int failures = 0;
    for (uint32_t i = 0; i < GOLDEN_VECTOR_COUNT; i++) {
        const golden_vector *v = &golden_vectors[i];
        const ccoip_pb_message_desc *d = ccoip_pb_find_message(v->type);
        uint64_t arena_cap = ccoip_pb_arena_bound(v->len), len = 0;
        void *msg = calloc(1, (size_t)(d != NULL ? d->struct_size : 1));
        void *mem = malloc((size_t)arena_cap);
        ccoip_pb_arena arena;
        ccoip_pb_arena_init(&arena, mem, arena_cap);
        if (d == NULL || msg == NULL || mem == NULL ||
            d->decode(v->bytes, v->len, NULL, &arena, msg) != pcclSuccess ||
            d->encode(msg, out, sizeof(out), &len) != pcclSuccess) {
            fprintf(stderr, "golden_dump: %s does not round-trip\n", v->id);
            failures++;
        } else {
            print_hex("", v->id, out, len);
        }
        free(msg);
        free(mem);
    }
    for (uint32_t i = 0; i < GOLDEN_SAMPLE_COUNT; i++) {
        uint64_t len = 0;
        if (golden_samples[i].build(out, sizeof(out), &len) != pcclSuccess) {
            fprintf(stderr, "golden_dump: sample %s does not encode\n", golden_samples[i].id);
            failures++;
            continue;
        }
        print_hex("c:", golden_samples[i].id, out, len);
    }
    return failures == 0 ? 0 : 1;
}
