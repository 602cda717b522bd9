/*
 * pt_nng.c — the nng stream data plane (pt_nng.h, pt_dp.h): sends and
 * receives through nng aios with iovs straight from and into the driver's
 * buffers; the aio callbacks only report the completion (pt_dp_done_fn).
 */
#include "pt_nng.h"

#include <assert.h>
#include <stddef.h>

static void nng_cb_send(void *arg)
{
    pt_nng_stream *ns = arg;
    ns->done(ns->arg, ns->conn, true, nng_aio_result(ns->send_aio), nng_aio_count(ns->send_aio));
}

static void nng_cb_recv(void *arg)
{
    pt_nng_stream *ns = arg;
    ns->done(ns->arg, ns->conn, false, nng_aio_result(ns->recv_aio), nng_aio_count(ns->recv_aio));
}

int pt_nng_stream_init(pt_nng_stream *ns, uint64_t conn, pt_dp_done_fn done, void *arg)
{
    ns->s = NULL;
    ns->send_aio = NULL;
    ns->recv_aio = NULL;
    ns->conn = conn;
    ns->done = done;
    ns->arg = arg;
    int rv = nng_aio_alloc(&ns->send_aio, nng_cb_send, ns);
    if (rv == 0) rv = nng_aio_alloc(&ns->recv_aio, nng_cb_recv, ns);
    if (rv != 0) {
        if (ns->send_aio != NULL) nng_aio_free(ns->send_aio);
        ns->send_aio = NULL;
    }
    return rv;
}

void pt_nng_stream_fini(pt_nng_stream *ns)
{
    if (ns->s != NULL) nng_stream_close(ns->s);
    nng_aio_stop(ns->send_aio);
    nng_aio_stop(ns->recv_aio);
    nng_aio_free(ns->send_aio);
    nng_aio_free(ns->recv_aio);
    if (ns->s != NULL) nng_stream_free(ns->s);
    ns->s = NULL;
    ns->send_aio = NULL;
    ns->recv_aio = NULL;
}

static void nng_dp_send(void *t, const uint8_t *a, uint64_t na, const uint8_t *b, uint64_t nb)
{
    pt_nng_stream *ns = t;
    nng_iov iov[2];
    unsigned n = 1;
    iov[0].iov_buf = (void *)(uintptr_t)a;
    iov[0].iov_len = (size_t)na;
    if (nb > 0) {
        iov[1].iov_buf = (void *)(uintptr_t)b;
        iov[1].iov_len = (size_t)nb;
        n = 2;
    }
    nng_aio_set_iov(ns->send_aio, n, iov);
    nng_stream_send(ns->s, ns->send_aio);
}

static bool nng_dp_recv(void *t, uint8_t *dst, uint64_t want, const pt_dp_fuse *fuse)
{
    pt_nng_stream *ns = t;
    assert(fuse == NULL); /* pt_nng_ops.fuses is false */
    (void)fuse;
    nng_iov iov;
    iov.iov_buf = dst;
    iov.iov_len = (size_t)want;
    nng_aio_set_iov(ns->recv_aio, 1, &iov);
    nng_stream_recv(ns->s, ns->recv_aio);
    return false;
}

const pt_dp_ops pt_nng_ops = {
    .name = "nng stream",
    .fuses = false,
    .send = nng_dp_send,
    .recv = nng_dp_recv,
    .poll = NULL,
    .fd = NULL,
    .fuse_result = NULL,
    .close = NULL,
};

bool pt_stream_connected(nng_stream *s)
{
    nng_sockaddr a;
    if (nng_stream_get_addr(s, NNG_OPT_LOCADDR, &a) != 0) return true; /* not TCP (ipc) */
    if (a.s_family != NNG_AF_INET && a.s_family != NNG_AF_INET6) return true;
    return nng_stream_get_addr(s, NNG_OPT_REMADDR, &a) == 0;
}
