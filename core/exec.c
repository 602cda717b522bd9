/*
 * exec.c — the executor of the core's buffer actions (ccoip_exec.h): span
 * resolution, the checks of every kernel action, and the kernels' runs.
 */
#include "ccoip_exec.h"

#include <string.h>

#include "ccoip_dtype.h"
#include "ccoip_hash.h"
#include "ccoip_reduce.h"

void ccoip_exec_init(ccoip_exec *x, ccoip_exec_slot *slots, uint32_t nslots)
{
    x->slots = slots;
    x->nslots = nslots;
    if (slots != NULL && nslots > 0) memset(slots, 0, (size_t)nslots * sizeof *slots);
}

ccoip_exec_slot *ccoip_exec_slot_at(const ccoip_exec *x, uint32_t op_slot)
{
    return op_slot < x->nslots ? &x->slots[op_slot] : NULL;
}

void ccoip_exec_key(const ccoip_exec *x, const ccoip_action *a)
{
    ccoip_exec_slot *o = ccoip_exec_slot_at(x, a->op_slot);
    if (o == NULL) return;
    o->epoch = a->epoch;
    o->tag = a->tag;
    o->seq = a->seq;
    o->keyed = true;
}

static void say(const char **why, const char *what)
{
    if (why != NULL) *why = what;
}

uint8_t *ccoip_exec_span(const ccoip_exec *x, const ccoip_span_ref *s, const char **why)
{
    ccoip_exec_slot *o = ccoip_exec_slot_at(x, s->op_slot);
    if (o == NULL || !o->used) {
        say(why, "the span names an op slot that is not begun");
        return NULL;
    }
    uint8_t *base = NULL;
    uint64_t size = 0;
    switch (s->region) {
    case CCOIP_REGION_SEND:
        base = o->send;
        size = o->send_bytes;
        break;
    case CCOIP_REGION_RECV:
        base = o->recv;
        size = o->recv_bytes;
        break;
    case CCOIP_REGION_SCRATCH:
        base = o->scratch;
        size = o->scratch_bytes;
        break;
    case CCOIP_REGION_BACKUP:
        base = o->backup;
        size = o->backup_bytes;
        break;
    case CCOIP_REGION_TENSOR:
        if (o->tensors == NULL || s->tensor >= o->ntensors) {
            say(why, "a TENSOR span outside a sync's tensors");
            return NULL;
        }
        base = o->tensors[s->tensor];
        size = o->tensor_bytes[s->tensor];
        break;
    default:
        say(why, "the span names an unknown region");
        return NULL;
    }
    if (s->offset > size || s->length > size - s->offset) {
        say(why, "the span lies outside its region");
        return NULL;
    }
    if (base == NULL) return (uint8_t *)o; /* a zero-length region: any valid pointer */
    return base + s->offset;
}

pcclResult_t ccoip_exec_write(const ccoip_exec *x, const ccoip_action *a, const char **why)
{
    uint8_t *dst = ccoip_exec_span(x, &a->dst, why);
    if (dst == NULL) return pcclInternalError;
    if (a->len != a->dst.length || (a->len > 0 && a->data == NULL)) {
        say(why, "WRITE: the data is not as long as its span");
        return pcclInternalError;
    }
    if (a->len > 0) memcpy(dst, a->data, (size_t)a->len);
    return pcclSuccess;
}

bool ccoip_kernel_action(ccoip_action_type t)
{
    switch (t) {
    case CCOIP_ACT_REDUCE:
    case CCOIP_ACT_COPY:
    case CCOIP_ACT_QUANTIZE:
    case CCOIP_ACT_DEQUANTIZE:
    case CCOIP_ACT_FINALIZE:
    case CCOIP_ACT_HASH:
    case CCOIP_ACT_GATHER_REDUCE:
    case CCOIP_ACT_SCALE:
        return true;
    default:
        return false;
    }
}

/* Whether count elements of dtype fit in a span of `length` bytes (esz: dtype's size, 0: not). */
static bool fits(uint64_t count, uint64_t esz, uint64_t length)
{
    return esz > 0 && count <= length / esz;
}

static uint64_t esize(pcclDataType_t t)
{
    return ccoip_dtype_valid(t) ? ccoip_dtype_size(t) : 0;
}

static pcclResult_t bad(const char **why, const char *what)
{
    say(why, what);
    return pcclInternalError;
}

pcclResult_t ccoip_kernel_prepare(const ccoip_exec *x, const ccoip_action *a, ccoip_kernel *k,
                                  const char **why)
{
    memset(k, 0, sizeof *k);
    if (!ccoip_kernel_action(a->type)) return bad(why, "not a kernel action");
    k->act = *a;
    k->act.data = NULL;
    k->act.len = 0;
    const uint64_t esz = esize(a->dtype);
    switch (a->type) {
    case CCOIP_ACT_HASH:
        if (a->len >= CCOIP_STATE_NAME_MAX || (a->len > 0 && a->data == NULL)) {
            return bad(why, "HASH: the name is too long");
        }
        if (a->len > 0) memcpy(k->name, a->data, (size_t)a->len);
        k->name[a->len] = '\0';
        k->src = ccoip_exec_span(x, &a->src, why);
        if (k->src == NULL) return pcclInternalError;
        if (esz == 0 || a->count > a->src.length / esz || a->count * esz != a->src.length) {
            return bad(why, "HASH: the span is not count elements");
        }
        return pcclSuccess;
    case CCOIP_ACT_FINALIZE:
        k->dst = ccoip_exec_span(x, &a->dst, why);
        if (k->dst == NULL) return pcclInternalError;
        k->src = k->dst;
        if (!fits(a->count, esz, a->dst.length)) return bad(why, "FINALIZE beyond its span");
        return pcclSuccess;
    default:
        break;
    }
    k->dst = ccoip_exec_span(x, &a->dst, why);
    if (k->dst == NULL) return pcclInternalError;
    k->src = ccoip_exec_span(x, &a->src, why);
    if (k->src == NULL) return pcclInternalError;
    switch (a->type) {
    case CCOIP_ACT_REDUCE:
        if (!fits(a->count, esz, a->dst.length) || !fits(a->count, esz, a->src.length)) {
            return bad(why, "REDUCE beyond its spans");
        }
        if (a->base.length > 0) { /* dst = base op src (ccoip_sm.h v6) */
            k->base = ccoip_exec_span(x, &a->base, why);
            if (k->base == NULL) return pcclInternalError;
            if (a->base.length != a->dst.length) return bad(why, "REDUCE: base and dst differ");
        }
        return pcclSuccess;
    case CCOIP_ACT_GATHER_REDUCE:
        if (!ccoip_action_gather_ok(a)) return bad(why, "GATHER_REDUCE: fields do not fit");
        k->base = ccoip_exec_span(x, &a->base, why);
        return k->base != NULL ? pcclSuccess : pcclInternalError;
    case CCOIP_ACT_COPY:
        if (a->src.length != a->dst.length) return bad(why, "COPY: spans of different lengths");
        return pcclSuccess;
    case CCOIP_ACT_SCALE:
        if (!fits(a->count, esz, a->dst.length) || !fits(a->count, esz, a->src.length)) {
            return bad(why, "SCALE beyond its spans");
        }
        if (a->src.op_slot == a->dst.op_slot && a->src.region == a->dst.region &&
            a->src.offset != a->dst.offset && a->src.offset < a->dst.offset + a->dst.length &&
            a->dst.offset < a->src.offset + a->src.length) {
            return bad(why, "SCALE: src and dst overlap without being equal");
        }
        return pcclSuccess;
    case CCOIP_ACT_QUANTIZE:
        if (!fits(a->count, esize(a->quant.src_type), a->src.length) ||
            !fits(a->count, esize(a->quant.quant_type), a->dst.length)) {
            return bad(why, "QUANTIZE beyond its spans");
        }
        return pcclSuccess;
    case CCOIP_ACT_DEQUANTIZE:
        if (!fits(a->count, esize(a->quant.quant_type), a->src.length) ||
            !fits(a->count, esize(a->quant.src_type), a->dst.length)) {
            return bad(why, "DEQUANTIZE beyond its spans");
        }
        return pcclSuccess;
    default:
        return bad(why, "not a kernel action");
    }
}

uint64_t ccoip_kernel_units(const ccoip_kernel *k, uint64_t *unit_bytes)
{
    uint64_t ub = 0, n = 1;
    switch (k->act.type) {
    case CCOIP_ACT_REDUCE:
    case CCOIP_ACT_FINALIZE:
    case CCOIP_ACT_SCALE:
        ub = esize(k->act.dtype);
        n = k->act.count;
        break;
    case CCOIP_ACT_COPY:
        ub = 1;
        n = k->act.src.length;
        break;
    default:
        break;
    }
    if (unit_bytes != NULL) *unit_bytes = ub;
    return n;
}

pcclResult_t ccoip_kernel_run_part(ccoip_kernel *k, uint64_t from, uint64_t n)
{
    const ccoip_action *a = &k->act;
    const uint64_t esz = esize(a->dtype);
    switch (a->type) {
    case CCOIP_ACT_REDUCE: {
        const uint64_t off = from * esz;
        if (k->base != NULL) {
            return ccoip_reduce(a->red_op, a->dtype, k->dst + off, k->base + off, k->src + off, n);
        }
        return ccoip_reduce_inplace(a->red_op, a->dtype, k->dst + off, k->src + off, n);
    }
    case CCOIP_ACT_FINALIZE:
        return ccoip_reduce_finalize_avg(a->dtype, k->dst + from * esz, n, a->divisor);
    case CCOIP_ACT_SCALE:
        return ccoip_reduce_scale(a->dtype, k->dst + from * esz, k->src + from * esz, n, a->scale);
    case CCOIP_ACT_COPY:
        if (n > 0) memmove(k->dst + from, k->src + from, (size_t)n);
        return pcclSuccess;
    case CCOIP_ACT_QUANTIZE: {
        memset(&k->quant_out, 0, sizeof k->quant_out);
        pcclResult_t r =
            ccoip_quant_compute_meta(a->quant.algorithm, a->quant.src_type, a->quant.quant_type,
                                     k->src, a->count, &k->quant_out);
        if (r == pcclSuccess) r = ccoip_quantize(&k->quant_out, k->dst, k->src, a->count);
        return r;
    }
    case CCOIP_ACT_DEQUANTIZE:
        if (a->reduce)
            return ccoip_dequantize_reduce(&a->quant, a->red_op, k->dst, k->src, a->count);
        return ccoip_dequantize(&a->quant, k->dst, k->src, a->count);
    case CCOIP_ACT_GATHER_REDUCE:
        return ccoip_reduce_gather(a->red_op, a->dtype, k->dst, k->base, k->src, a->chunk,
                                   a->divisor, a->count);
    case CCOIP_ACT_HASH: {
        const ccoip_hash_entry e = {k->name, k->src, a->count, a->dtype};
        return ccoip_hash_tensor(&e, &k->hash);
    }
    default:
        return pcclInternalError;
    }
}

pcclResult_t ccoip_kernel_run(ccoip_kernel *k)
{
    return ccoip_kernel_run_part(k, 0, ccoip_kernel_units(k, NULL));
}
