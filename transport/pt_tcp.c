/*
 * pt_tcp.c — the POSIX TCP data plane (pt_tcp.h): a sender and a receiver
 * thread per taken-over tcp:// connection, blocking I/O; the data-plane
 * interface (pt_dp.h) as pt_tcp_ops.
 */
#define _GNU_SOURCE
#include "pt_tcp.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ccoip_dtype.h"
#include "ccoip_reduce.h"
#include "pt_sockbuf.h"

/* Bytes read per slice of a fused receive: fits L2 with the target's slice. */
#ifndef PT_TCP_SLICE
#define PT_TCP_SLICE ((uint64_t)256 << 10)
#endif
/* Requests up to this size are first tried without blocking on the caller's
 * thread: when the socket can take (or already holds) the bytes, they
 * complete without waking the link's thread (small messages). */
#ifndef PT_TCP_INLINE
#define PT_TCP_INLINE ((uint64_t)512 << 10)
#endif

typedef struct pt_tcp_dir {
    pthread_t thread;
    bool started;
    bool busy; /* a request is posted or under way */
    /* send: what is left of a then b; total is what the completion reports */
    const uint8_t *a, *b;
    uint64_t na, nb;
    uint64_t total;
    /* recv: dst[off .. want) is left */
    uint8_t *dst;
    uint64_t want;
    uint64_t off;
    bool fused;
    pt_dp_fuse fuse;
} pt_tcp_dir;

typedef struct pt_tcp_link {
    int fd;
    pt_sockbuf_state sockbuf; /* tx thread only */
    uint64_t conn;
    pt_dp_done_fn done;
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    bool keep_socket; /* close without shutting the connection down */
    pt_tcp_dir tx, rx;
    pcclResult_t fuse_result;
    uint8_t *scratch; /* PT_TCP_SLICE bytes, the receiver's */
    /* Parking (pt_tcp_open with park, link_recv, link_poll): touched only by the thread that
     * issues receives. */
    bool can_park;
    bool parked;
    uint8_t *pk_dst;
    uint64_t pk_want, pk_off;
} pt_tcp_link;

/* Reports a completion: err 0, or an errno value (the connection broke: NNG_ECONNRESET). */
static void link_done(pt_tcp_link *l, bool send, int err, uint64_t count)
{
    l->done(l->arg, l->conn, send, err != 0 ? NNG_ECONNRESET : 0, count);
}

bool pt_tcp_enabled(void)
{
    const char *e = getenv("PCCL_DATAPLANE");
    return e == NULL || strcmp(e, "nng") != 0;
}

/* ---- finding the stream's socket ---- */

static bool addr_from_nng(const nng_sockaddr *na, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    if (na->s_family == NNG_AF_INET) {
        struct sockaddr_in *s = (struct sockaddr_in *)ss;
        s->sin_family = AF_INET;
        s->sin_port = na->s_in.sa_port; /* both in network order */
        s->sin_addr.s_addr = na->s_in.sa_addr;
        *len = sizeof *s;
        return true;
    }
    if (na->s_family == NNG_AF_INET6) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
        s->sin6_family = AF_INET6;
        s->sin6_port = na->s_in6.sa_port;
        memcpy(&s->sin6_addr, na->s_in6.sa_addr, 16);
        *len = sizeof *s;
        return true;
    }
    return false;
}

static bool addr_same(const struct sockaddr_storage *x, const struct sockaddr_storage *y)
{
    if (x->ss_family != y->ss_family) return false;
    if (x->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)x;
        const struct sockaddr_in *b = (const struct sockaddr_in *)y;
        return a->sin_port == b->sin_port && a->sin_addr.s_addr == b->sin_addr.s_addr;
    }
    if (x->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)x;
        const struct sockaddr_in6 *b = (const struct sockaddr_in6 *)y;
        return a->sin6_port == b->sin6_port &&
               memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr) == 0;
    }
    return false;
}

/* True when fd is a socket whose local and remote addresses are loc and rem. */
static bool fd_matches(int fd, const struct sockaddr_storage *loc,
                       const struct sockaddr_storage *rem)
{
    struct sockaddr_storage a, b;
    socklen_t la = sizeof a, lb = sizeof b;
    if (getsockname(fd, (struct sockaddr *)&a, &la) != 0) return false;
    if (getpeername(fd, (struct sockaddr *)&b, &lb) != 0) return false;
    return addr_same(&a, loc) && addr_same(&b, rem);
}

/* nng 1.5.2 exposes no descriptor. The (local, remote) address pair of a
 * connected TCP socket names it uniquely among the live ones: the one socket
 * of /proc/self/fd whose getsockname / getpeername give that pair is the
 * stream's. Only read-only calls touch the other descriptors; the match is
 * duplicated and checked again on the duplicate (a descriptor closed and
 * reused meanwhile cannot carry the same live pair). This process's
 * descriptors are few; /proc/net/tcp, read before, lists every socket of the
 * host and cost milliseconds per connection on a busy one. */
static int stream_fd_dup(nng_stream *s)
{
    bool tls = false;
    if (nng_stream_get_bool(s, NNG_OPT_TLS_VERIFIED, &tls) == 0) return -1; /* a TLS stream */
    nng_sockaddr nl, nr;
    if (nng_stream_get_addr(s, NNG_OPT_LOCADDR, &nl) != 0) return -1;
    if (nng_stream_get_addr(s, NNG_OPT_REMADDR, &nr) != 0) return -1;
    struct sockaddr_storage loc, rem;
    socklen_t ll, lr;
    if (!addr_from_nng(&nl, &loc, &ll) || !addr_from_nng(&nr, &rem, &lr)) return -1;
    DIR *dir = opendir("/proc/self/fd");
    if (dir == NULL) return -1;
    int found = -1;
    const struct dirent *e;
    while (found < 0 && (e = readdir(dir)) != NULL) {
        char *end = NULL;
        const long fd = strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd < 0 || fd > INT_MAX) continue;
        char path[64], link[64];
        snprintf(path, sizeof path, "/proc/self/fd/%ld", fd);
        const ssize_t n = readlink(path, link, sizeof link - 1);
        if (n <= 0) continue;
        link[n] = '\0';
        if (strncmp(link, "socket:[", 8) != 0 || !fd_matches((int)fd, &loc, &rem)) continue;
        const int dup_fd = fcntl((int)fd, F_DUPFD_CLOEXEC, 0);
        if (dup_fd >= 0 && fd_matches(dup_fd, &loc, &rem)) {
            found = dup_fd;
        } else if (dup_fd >= 0) {
            close(dup_fd);
        }
    }
    closedir(dir);
    return found;
}

/* ---- threads ---- */

/* Writes a then b; with MSG_DONTWAIT stops at EAGAIN. Advances the pointers. */
static int write_some(int fd, const uint8_t **pa, uint64_t *pna, const uint8_t **pb, uint64_t *pnb,
                      int flags)
{
    const uint8_t *a = *pa, *b = *pb;
    uint64_t na = *pna, nb = *pnb;
    int rv = 0;
    while (na + nb > 0) {
        struct iovec iov[2];
        int n = 0;
        if (na > 0) {
            iov[n].iov_base = (void *)(uintptr_t)a;
            iov[n].iov_len = (size_t)na;
            n++;
        }
        if (nb > 0) {
            iov[n].iov_base = (void *)(uintptr_t)b;
            iov[n].iov_len = (size_t)nb;
            n++;
        }
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = iov;
        m.msg_iovlen = (size_t)n;
        const ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL | flags);
        if (w < 0) {
            if (errno == EINTR) continue;
            rv = errno != 0 ? errno : EIO;
            break;
        }
        uint64_t done = (uint64_t)w;
        const uint64_t fa = done < na ? done : na;
        /* Moved only by what was written: a or b may be NULL (no header, no payload), and NULL
         * + 0 is undefined (clang's UBSan, fuzz_transport). */
        if (fa > 0) a += fa;
        na -= fa;
        done -= fa;
        if (done > 0) b += done;
        nb -= done;
    }
    *pa = a;
    *pna = na;
    *pb = b;
    *pnb = nb;
    return rv;
}

static int read_flags(int fd, uint8_t *p, uint64_t n, uint64_t *got, int flags);

static int read_all(int fd, uint8_t *p, uint64_t n, uint64_t *got)
{
    return read_flags(fd, p, n, got, 0);
}

/* Reads exactly n bytes (MSG_DONTWAIT: stops at EAGAIN); *got says how many arrived. 0, EOF (-1) or
 * an errno. */
static int read_flags(int fd, uint8_t *p, uint64_t n, uint64_t *got, int flags)
{
    *got = 0;
    while (*got < n) {
        const ssize_t r = recv(fd, p + *got, (size_t)(n - *got), flags);
        if (r == 0) return -1;
        if (r < 0) {
            if (errno == EINTR) continue;
            return errno != 0 ? errno : EIO;
        }
        *got += (uint64_t)r;
    }
    return 0;
}

static void *tx_main(void *arg)
{
    pt_tcp_link *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && !l->tx.busy)
            pthread_cond_wait(&l->cv, &l->mu);
        if (l->stop) break;
        const uint8_t *a = l->tx.a, *b = l->tx.b;
        uint64_t na = l->tx.na, nb = l->tx.nb;
        const uint64_t total = l->tx.total;
        pthread_mutex_unlock(&l->mu);
        const int err = write_some(l->fd, &a, &na, &b, &nb, 0);
        /* After a large send: grow the send buffer past autotuning's cap if that cap held the
         * link back (pt_sockbuf.h), from the kernel's own measurements. */
        if (err == 0 && total >= PT_SOCKBUF_ADAPT_MIN) pt_sockbuf_adapt(l->fd, &l->sockbuf);
        pthread_mutex_lock(&l->mu);
        l->tx.busy = false;
        if (l->stop) break;
        pthread_mutex_unlock(&l->mu);
        link_done(l, true, err, err == 0 ? total : 0);
        pthread_mutex_lock(&l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* A fused receive: slice by slice into scratch, reduced into the target. */
static int rx_fused(pt_tcp_link *l, const pt_dp_fuse *f, uint64_t want, uint64_t *got,
                    pcclResult_t *res)
{
    const uint64_t esz = ccoip_dtype_size(f->dtype);
    *got = 0;
    pcclResult_t fr = pcclSuccess;
    while (*got < want) {
        const uint64_t n = want - *got < PT_TCP_SLICE ? want - *got : PT_TCP_SLICE;
        uint64_t g = 0;
        const int err = read_all(l->fd, l->scratch, n, &g);
        if (err != 0) {
            *got += g;
            return err;
        }
        if (fr == pcclSuccess && f->base != NULL) {
            fr = ccoip_reduce(f->op, f->dtype, f->target + *got, f->base + *got, l->scratch,
                              n / esz);
        } else if (fr == pcclSuccess) {
            fr = ccoip_reduce_inplace(f->op, f->dtype, f->target + *got, l->scratch, n / esz);
        }
        *got += n;
    }
    *res = fr;
    return 0;
}

static void *rx_main(void *arg)
{
    pt_tcp_link *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && !l->rx.busy)
            pthread_cond_wait(&l->cv, &l->mu);
        if (l->stop) break;
        uint8_t *dst = l->rx.dst;
        const uint64_t want = l->rx.want, off = l->rx.off;
        const bool fused = l->rx.fused;
        const pt_dp_fuse fuse = l->rx.fuse;
        pthread_mutex_unlock(&l->mu);
        uint64_t got = 0;
        pcclResult_t fr = pcclSuccess;
        const int rv = fused ? rx_fused(l, &fuse, want, &got, &fr)
                             : read_all(l->fd, dst + off, want - off, &got);
        if (!fused) got += off;
        pthread_mutex_lock(&l->mu);
        l->fuse_result = fr;
        l->rx.busy = false;
        if (l->stop) break;
        pthread_mutex_unlock(&l->mu);
        if (rv == 0) {
            link_done(l, false, 0, got);
        } else if (rv == -1 && got == 0) {
            link_done(l, false, 0, 0); /* end of stream */
        } else {
            link_done(l, false, rv == -1 ? ECONNRESET : rv, 0);
        }
        pthread_mutex_lock(&l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* ---- the data-plane operations (pt_dp.h) ---- */

static void link_close(void *t);

void *pt_tcp_open(nng_stream *s, uint64_t conn, pt_dp_done_fn done, void *arg, bool park)
{
    const int fd = stream_fd_dup(s);
    if (fd < 0) return NULL;
    pt_tcp_link *l = calloc(1, sizeof *l);
    if (l != NULL) l->scratch = malloc((size_t)PT_TCP_SLICE);
    const int fl = fcntl(fd, F_GETFL);
    if (l == NULL || l->scratch == NULL || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        if (l != NULL) free(l->scratch);
        free(l);
        close(fd);
        return NULL;
    }
    const int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* Explicit buffer sizes (PCCL_TCP_SNDBUF / PCCL_TCP_RCVBUF bytes, pt_sockbuf.h). */
    pt_sockbuf_open(fd, &l->sockbuf);
    l->fd = fd;
    l->conn = conn;
    l->done = done;
    l->arg = arg;
    l->can_park = park;
    l->fuse_result = pcclSuccess;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    if (pthread_create(&l->tx.thread, NULL, tx_main, l) == 0) l->tx.started = true;
    if (l->tx.started && pthread_create(&l->rx.thread, NULL, rx_main, l) == 0) {
        l->rx.started = true;
    }
    if (!l->rx.started) {
        /* No threads: give the stream back to nng (blocking mode off again). */
        fcntl(fd, F_SETFL, fl);
        l->keep_socket = true;
        link_close(l);
        return NULL;
    }
    return l;
}

static void link_send(void *t, const uint8_t *a, uint64_t na, const uint8_t *b, uint64_t nb)
{
    pt_tcp_link *l = t;
    const uint64_t total = na + nb;
    if (total <= PT_TCP_INLINE) {
        const int err = write_some(l->fd, &a, &na, &b, &nb, MSG_DONTWAIT);
        if (err == 0 || (err != EAGAIN && err != EWOULDBLOCK)) {
            link_done(l, true, err, err == 0 ? total : 0);
            return;
        }
    }
    pthread_mutex_lock(&l->mu);
    l->tx.a = a;
    l->tx.na = na;
    l->tx.b = b;
    l->tx.nb = nb;
    l->tx.total = total;
    l->tx.busy = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

static bool link_recv(void *t, uint8_t *dst, uint64_t want, const pt_dp_fuse *fuse)
{
    pt_tcp_link *l = t;
    uint64_t off = 0;
    if (fuse == NULL && want <= PT_TCP_INLINE) {
        const int rv = read_flags(l->fd, dst, want, &off, MSG_DONTWAIT);
        if (rv == 0) {
            link_done(l, false, 0, want);
            return false;
        }
        if (rv == -1) {
            link_done(l, false, off == 0 ? 0 : ECONNRESET, 0); /* end of stream */
            return false;
        }
        if (rv != EAGAIN && rv != EWOULDBLOCK) {
            link_done(l, false, rv, 0);
            return false;
        }
        if (l->can_park) {
            l->parked = true;
            l->pk_dst = dst;
            l->pk_want = want;
            l->pk_off = off;
            return true;
        }
    }
    pthread_mutex_lock(&l->mu);
    l->rx.dst = dst;
    l->rx.want = want;
    l->rx.off = off;
    l->rx.fused = fuse != NULL;
    if (fuse != NULL) l->rx.fuse = *fuse;
    l->fuse_result = pcclSuccess;
    l->rx.busy = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return false;
}

static int link_fd(const void *t)
{
    const pt_tcp_link *l = t;
    return l->fd;
}

static bool link_poll(void *t)
{
    pt_tcp_link *l = t;
    if (!l->parked) return false;
    uint64_t got = 0;
    const int rv =
        read_flags(l->fd, l->pk_dst + l->pk_off, l->pk_want - l->pk_off, &got, MSG_DONTWAIT);
    l->pk_off += got;
    if (rv == EAGAIN || rv == EWOULDBLOCK) return true; /* still parked */
    l->parked = false;
    if (rv == 0) {
        link_done(l, false, 0, l->pk_want);
    } else if (rv == -1) {
        link_done(l, false, l->pk_off == 0 ? 0 : ECONNRESET, 0); /* end of stream */
    } else {
        link_done(l, false, rv, 0);
    }
    return false;
}

static pcclResult_t link_fuse_result(void *t)
{
    pt_tcp_link *l = t;
    pthread_mutex_lock(&l->mu);
    const pcclResult_t r = l->fuse_result;
    pthread_mutex_unlock(&l->mu);
    return r;
}

static void link_close(void *t)
{
    pt_tcp_link *l = t;
    if (l == NULL) return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (!l->keep_socket)
        (void)shutdown(l->fd, SHUT_RDWR); /* wakes a thread blocked in recv/sendmsg */
    if (l->tx.started) pthread_join(l->tx.thread, NULL);
    if (l->rx.started) pthread_join(l->rx.thread, NULL);
    close(l->fd);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l->scratch);
    free(l);
}

const pt_dp_ops pt_tcp_ops = {
    .name = "POSIX TCP",
    .fuses = true,
    .send = link_send,
    .recv = link_recv,
    .poll = link_poll,
    .fd = link_fd,
    .fuse_result = link_fuse_result,
    .close = link_close,
};
