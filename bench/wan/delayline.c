/*
 * delayline.c — the WAN testbed's delay line (issue 23, docs/wan.md).
 *
 * This kernel has no netem, so the one-way delay of every path between two
 * namespaces of the testbed is made here, in user space, on IP packets: one
 * process holds one TUN device per node (a peer or the master), each device
 * living inside that node's network namespace, where it carries the route to
 * every other node. A packet the node sends to another node's address comes
 * out of the node's TUN here; it is timestamped, held in the queue of its
 * (source, destination) pair until its release time (the pair's one-way
 * delay, plus optional uniform jitter), and then written into the
 * destination's TUN, where the destination's kernel receives it. TCP on both
 * ends therefore sees a real round-trip time and real window dynamics (no
 * proxy terminates it). Rates are not made here: scripts/wan-testbed.sh puts
 * htb classes on each TUN's egress, in the namespaces.
 *
 *   pccl-delayline --node NS:IFNAME:IPV4 [--node ...]
 *       [--delay-us D] [--jitter-us J] [--loss-pct P] [--seed S]
 *       [--pairs FILE] [--limit-pkts K] [--limit-bytes B] [--reorder]
 *       [--clock epoll|spin] [--offload] [--ready FILE] [--stats FILE]
 *
 * --node attaches to the existing (persistent) TUN device IFNAME inside the
 * named network namespace (/var/run/netns/NS, made by `ip netns add`); IPV4 is
 * the node's address: packets are routed by their IPv4 destination. Nodes are
 * numbered 0, 1, ... in the order given. --delay-us, --jitter-us and
 * --loss-pct are the defaults of every pair; --pairs FILE overrides them per
 * directed pair, one line "SRC DST DELAY_US [JITTER_US [LOSS_PCT]]" (node
 * numbers; '#' starts a comment). Jitter is uniform in [-J, +J] (clamped at
 * 0) and never reorders a pair's packets (a packet is never released before
 * the one that came before it) unless --reorder. Loss drops packets at random
 * with probability P/100, from a seeded generator (--seed; same seed, same
 * draws for the same packet sequence). Each pair's queue is bounded
 * (drop-tail at --limit-pkts packets or --limit-bytes bytes, counted).
 *
 * --clock epoll (default) sleeps in epoll_pwait with a timerfd armed at the
 * earliest release time (timer slack 1 ns); --clock spin never sleeps (polls
 * every device and the clock in a loop: it burns a core; docs/wan.md compares
 * the two). --offload lets the kernel hand over and take back TCP segments of
 * up to 64 KiB (IFF_VNET_HDR + TUNSETOFFLOAD): far fewer packets per byte, so
 * a higher ceiling, but a loss then drops a whole burst; the script's devices
 * must be made with vnet_hdr for it.
 *
 * SIGTERM or SIGINT: stops, prints the stats (per pair: packets and bytes
 * delivered, queue drops, random losses, the deepest queue) to stderr and to
 * --stats FILE, exits 0. SIGUSR1 prints them without stopping. --ready FILE is
 * written once every device is attached, so a script can wait for it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_NODES 64
/* A read needs room for the largest packet: 64 KiB with offload, plus the header. */
#define BUF_BYTES (65536 + 64)
/* Packets read from one device before the others get their turn. */
#define READ_BATCH 64

typedef struct pkt {
    struct pkt *next;
    struct pkt *prev;
    uint64_t due_ns; /* release time, CLOCK_MONOTONIC */
    uint32_t len;
    uint8_t data[];
} pkt;

typedef struct pair {
    pkt *head; /* earliest release first */
    pkt *tail;
    uint64_t delay_ns;
    uint64_t jitter_ns;
    double loss; /* probability, 0..1 */
    uint32_t qpkts;
    uint64_t qbytes;
    /* stats */
    uint64_t pkts;
    uint64_t bytes;
    uint64_t drops; /* queue full */
    uint64_t lost;  /* random loss */
    uint64_t txerr; /* the destination's write failed */
    uint32_t max_qpkts;
} pair;

typedef struct node {
    char ns[64];
    char ifname[IFNAMSIZ];
    uint32_t addr; /* network order */
    int fd;
} node;

static node nodes[MAX_NODES];
static int n_nodes;
static pair *pairs; /* [src * n_nodes + dst] */
static uint64_t unroutable;
static uint64_t read_pkts;
static bool reorder;
static bool offload;
static bool spin;
static uint32_t limit_pkts = 50000;
static uint64_t limit_bytes = 64ull << 20;
static uint64_t rng_state = 1;
static const char *stats_path;
static volatile sig_atomic_t stop_flag;
static volatile sig_atomic_t dump_flag;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* splitmix64: small, seedable, and the same draws everywhere. */
static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_unit(void)
{
    return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0);
}

static void on_signal(int sig)
{
    if (sig == SIGUSR1) {
        dump_flag = 1;
    } else {
        stop_flag = 1;
    }
}

static void die(const char *what)
{
    fprintf(stderr, "pccl-delayline: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Opens the TUN device ifname inside namespace ns (the calling thread enters
 * the namespace for the open, then returns to its own), non-blocking. */
static int attach_tun(const node *nd, int home_ns)
{
    char path[96];
    snprintf(path, sizeof path, "/var/run/netns/%.63s", nd->ns);
    const int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) die(path);
    if (setns(nsfd, CLONE_NEWNET) != 0) die("setns");
    close(nsfd);
    const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) die("/dev/net/tun");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI | (offload ? IFF_VNET_HDR : 0);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%.15s", nd->ifname);
    if (ioctl(fd, TUNSETIFF, &ifr) != 0) die("TUNSETIFF (is the device made, in that namespace?)");
    if (offload) {
        /* Let the kernel pass TCP segments up to 64 KiB, checksums unfinished:
         * they go through unchanged to another TUN, which accepts the same. */
        const unsigned long f = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
        if (ioctl(fd, TUNSETOFFLOAD, f) != 0) die("TUNSETOFFLOAD");
    }
    if (setns(home_ns, CLONE_NEWNET) != 0) die("setns (home)");
    return fd;
}

static int node_of_addr(uint32_t addr)
{
    for (int i = 0; i < n_nodes; i++) {
        if (nodes[i].addr == addr) return i;
    }
    return -1;
}

/* The destination node of a packet as read from a TUN, or -1 (not IPv4, or
 * not one of ours: counted, dropped). */
static int route(const uint8_t *data, uint32_t len)
{
    const uint32_t off = offload ? (uint32_t)sizeof(struct virtio_net_hdr) : 0u;
    if (len < off + 20u || (data[off] >> 4) != 4) return -1;
    uint32_t dst;
    memcpy(&dst, data + off + 16, sizeof dst);
    return node_of_addr(dst);
}

static void enqueue(int src, const uint8_t *data, uint32_t len, uint64_t t)
{
    const int dst = route(data, len);
    if (dst < 0 || dst == src) {
        unroutable++;
        return;
    }
    pair *pr = &pairs[src * n_nodes + dst];
    if (pr->loss > 0.0 && rng_unit() < pr->loss) {
        pr->lost++;
        return;
    }
    if (pr->qpkts >= limit_pkts || pr->qbytes + len > limit_bytes) {
        pr->drops++;
        return;
    }
    pkt *p = malloc(sizeof *p + len);
    if (p == NULL) {
        pr->drops++;
        return;
    }
    memcpy(p->data, data, len);
    p->len = len;
    uint64_t due = t + pr->delay_ns;
    if (pr->jitter_ns > 0) {
        const double j = (rng_unit() * 2.0 - 1.0) * (double)pr->jitter_ns;
        due = (j < 0 && (uint64_t)(-j) > pr->delay_ns) ? t : (uint64_t)((double)due + j);
    }
    /* Without --reorder a packet never overtakes the one before it. */
    if (!reorder && pr->tail != NULL && due < pr->tail->due_ns) due = pr->tail->due_ns;
    p->due_ns = due;
    pkt *at = pr->tail; /* insert after `at`: walk back over later packets (reorder only) */
    while (at != NULL && at->due_ns > due)
        at = at->prev;
    p->prev = at;
    p->next = at != NULL ? at->next : pr->head;
    if (p->next != NULL) {
        p->next->prev = p;
    } else {
        pr->tail = p;
    }
    if (at != NULL) {
        at->next = p;
    } else {
        pr->head = p;
    }
    pr->qpkts++;
    pr->qbytes += len;
    if (pr->qpkts > pr->max_qpkts) pr->max_qpkts = pr->qpkts;
}

/* Writes every packet whose time has come; returns the earliest release time
 * still pending (UINT64_MAX: none). */
static uint64_t release_due(uint64_t now)
{
    uint64_t next = UINT64_MAX;
    for (int s = 0; s < n_nodes; s++) {
        for (int d = 0; d < n_nodes; d++) {
            pair *pr = &pairs[s * n_nodes + d];
            while (pr->head != NULL && pr->head->due_ns <= now) {
                pkt *p = pr->head;
                pr->head = p->next;
                if (pr->head != NULL) {
                    pr->head->prev = NULL;
                } else {
                    pr->tail = NULL;
                }
                pr->qpkts--;
                pr->qbytes -= p->len;
                if (write(nodes[d].fd, p->data, p->len) == (ssize_t)p->len) {
                    pr->pkts++;
                    pr->bytes += p->len;
                } else {
                    pr->txerr++;
                }
                free(p);
            }
            if (pr->head != NULL && pr->head->due_ns < next) next = pr->head->due_ns;
        }
    }
    return next;
}

/* Reads up to READ_BATCH packets from node i; false when the device is empty. */
static bool drain(int i, uint8_t *buf)
{
    for (int k = 0; k < READ_BATCH; k++) {
        const ssize_t n = read(nodes[i].fd, buf, BUF_BYTES);
        if (n <= 0) {
            if (n < 0 && errno != EAGAIN && errno != EINTR) die("read");
            return false;
        }
        read_pkts++;
        enqueue(i, buf, (uint32_t)n, now_ns());
    }
    return true;
}

static void print_stats(FILE *f)
{
    uint64_t pk = 0, by = 0, dr = 0, lo = 0, tx = 0;
    fprintf(f, "# src dst delay_us packets bytes drops lost txerr max_queue_pkts\n");
    for (int s = 0; s < n_nodes; s++) {
        for (int d = 0; d < n_nodes; d++) {
            const pair *pr = &pairs[s * n_nodes + d];
            if (s == d || (pr->pkts | pr->drops | pr->lost | pr->txerr) == 0) continue;
            fprintf(f,
                    "pair %d %d %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
                    " %" PRIu64 " %u\n",
                    s, d, pr->delay_ns / 1000, pr->pkts, pr->bytes, pr->drops, pr->lost, pr->txerr,
                    pr->max_qpkts);
            pk += pr->pkts;
            by += pr->bytes;
            dr += pr->drops;
            lo += pr->lost;
            tx += pr->txerr;
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(f,
            "total packets %" PRIu64 " bytes %" PRIu64 " drops %" PRIu64 " lost %" PRIu64
            " txerr %" PRIu64 " unroutable %" PRIu64 " read %" PRIu64 " cpu_user_s %.2f"
            " cpu_sys_s %.2f\n",
            pk, by, dr, lo, tx, unroutable, read_pkts,
            (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6,
            (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6);
    fflush(f);
}

static void dump_stats(void)
{
    print_stats(stderr);
    if (stats_path != NULL) {
        FILE *f = fopen(stats_path, "w");
        if (f != NULL) {
            print_stats(f);
            fclose(f);
        }
    }
}

static void load_pairs(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) die(path);
    char line[256];
    int lineno = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash != NULL) *hash = '\0';
        int s = -1, d = -1;
        double delay = 0, jitter = 0, loss = 0;
        const int got = sscanf(line, "%d %d %lf %lf %lf", &s, &d, &delay, &jitter, &loss);
        if (got <= 0) continue;
        if (got < 3 || s < 0 || d < 0 || s >= n_nodes || d >= n_nodes || delay < 0 || jitter < 0 ||
            loss < 0 || loss > 100) {
            fprintf(stderr, "pccl-delayline: %s:%d: want SRC DST DELAY_US [JITTER_US [LOSS_PCT]]\n",
                    path, lineno);
            exit(2);
        }
        pair *pr = &pairs[s * n_nodes + d];
        pr->delay_ns = (uint64_t)(delay * 1000.0);
        if (got >= 4) pr->jitter_ns = (uint64_t)(jitter * 1000.0);
        if (got >= 5) pr->loss = loss / 100.0;
    }
    fclose(f);
}

static void usage(void)
{
    fprintf(stderr, "usage: pccl-delayline --node NS:IFNAME:IPV4 [--node ...] [--delay-us D]\n"
                    "  [--jitter-us J] [--loss-pct P] [--seed S] [--pairs FILE] [--limit-pkts K]\n"
                    "  [--limit-bytes B] [--reorder] [--clock epoll|spin] [--offload]\n"
                    "  [--ready FILE] [--stats FILE]\n");
    exit(2);
}

static void add_node(const char *spec)
{
    if (n_nodes >= MAX_NODES) usage();
    node *nd = &nodes[n_nodes];
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s", spec);
    char *a = strchr(tmp, ':');
    char *b = a != NULL ? strchr(a + 1, ':') : NULL;
    if (a == NULL || b == NULL) usage();
    *a = *b = '\0';
    struct in_addr in;
    if (strlen(tmp) >= sizeof nd->ns || strlen(a + 1) >= sizeof nd->ifname ||
        inet_pton(AF_INET, b + 1, &in) != 1) {
        usage();
    }
    snprintf(nd->ns, sizeof nd->ns, "%s", tmp);
    snprintf(nd->ifname, sizeof nd->ifname, "%s", a + 1);
    nd->addr = in.s_addr;
    nd->fd = -1;
    n_nodes++;
}

int main(int argc, char **argv)
{
    double delay_us = 0, jitter_us = 0, loss_pct = 0;
    const char *pairs_path = NULL;
    const char *ready_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--reorder") == 0) {
            reorder = true;
            continue;
        }
        if (strcmp(a, "--offload") == 0) {
            offload = true;
            continue;
        }
        if (i + 1 >= argc) usage();
        const char *v = argv[++i];
        if (strcmp(a, "--node") == 0) {
            add_node(v);
        } else if (strcmp(a, "--delay-us") == 0) {
            delay_us = atof(v);
        } else if (strcmp(a, "--jitter-us") == 0) {
            jitter_us = atof(v);
        } else if (strcmp(a, "--loss-pct") == 0) {
            loss_pct = atof(v);
        } else if (strcmp(a, "--seed") == 0) {
            rng_state = strtoull(v, NULL, 0);
        } else if (strcmp(a, "--pairs") == 0) {
            pairs_path = v;
        } else if (strcmp(a, "--limit-pkts") == 0) {
            limit_pkts = (uint32_t)strtoul(v, NULL, 0);
        } else if (strcmp(a, "--limit-bytes") == 0) {
            limit_bytes = strtoull(v, NULL, 0);
        } else if (strcmp(a, "--clock") == 0) {
            if (strcmp(v, "spin") == 0) {
                spin = true;
            } else if (strcmp(v, "epoll") != 0) {
                usage();
            }
        } else if (strcmp(a, "--ready") == 0) {
            ready_path = v;
        } else if (strcmp(a, "--stats") == 0) {
            stats_path = v;
        } else {
            usage();
        }
    }
    if (n_nodes < 2 || delay_us < 0 || jitter_us < 0 || loss_pct < 0 || loss_pct > 100) usage();
    pairs = calloc((size_t)n_nodes * (size_t)n_nodes, sizeof *pairs);
    if (pairs == NULL) die("calloc");
    for (int k = 0; k < n_nodes * n_nodes; k++) {
        pairs[k].delay_ns = (uint64_t)(delay_us * 1000.0);
        pairs[k].jitter_ns = (uint64_t)(jitter_us * 1000.0);
        pairs[k].loss = loss_pct / 100.0;
    }
    if (pairs_path != NULL) load_pairs(pairs_path);

    /* The default 50 us of timer slack would be added to every release. */
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    const int home_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home_ns < 0) die("/proc/self/ns/net");
    for (int i = 0; i < n_nodes; i++) {
        nodes[i].fd = attach_tun(&nodes[i], home_ns);
    }
    close(home_ns);

    /* SIGTERM/SIGINT/SIGUSR1 are blocked except inside the wait (epoll_pwait),
     * so a signal never slips in between the flag check and the sleep. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigset_t block, waitmask;
    sigprocmask(SIG_SETMASK, NULL, &waitmask);
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGUSR1);
    if (!spin) sigprocmask(SIG_BLOCK, &block, &waitmask);

    const int ep = epoll_create1(EPOLL_CLOEXEC);
    const int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (ep < 0 || tfd < 0) die("epoll/timerfd");
    struct epoll_event ev;
    for (int i = 0; i < n_nodes; i++) {
        ev.events = EPOLLIN;
        ev.data.u32 = (uint32_t)i;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, nodes[i].fd, &ev) != 0) die("epoll_ctl");
    }
    ev.events = EPOLLIN;
    ev.data.u32 = UINT32_MAX;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev) != 0) die("epoll_ctl");

    if (ready_path != NULL) {
        FILE *f = fopen(ready_path, "w");
        if (f == NULL) die(ready_path);
        fprintf(f, "ready %d\n", (int)getpid());
        fclose(f);
    }
    fprintf(stderr, "pccl-delayline: %d nodes, clock %s%s%s\n", n_nodes, spin ? "spin" : "epoll",
            offload ? ", offload" : "", reorder ? ", reorder" : "");

    uint8_t *buf = malloc(BUF_BYTES);
    if (buf == NULL) die("malloc");
    uint64_t armed = UINT64_MAX;
    while (!stop_flag) {
        if (dump_flag) {
            dump_flag = 0;
            dump_stats();
        }
        uint64_t next = release_due(now_ns());
        if (spin) {
            for (int i = 0; i < n_nodes; i++) {
                while (drain(i, buf)) {
                }
            }
            continue;
        }
        if (next != armed) {
            struct itimerspec its;
            memset(&its, 0, sizeof its);
            if (next != UINT64_MAX) {
                its.it_value.tv_sec = (time_t)(next / 1000000000ull);
                its.it_value.tv_nsec = (long)(next % 1000000000ull);
            }
            if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) != 0) die("timerfd_settime");
            armed = next;
        }
        struct epoll_event evs[MAX_NODES + 1];
        const int n = epoll_pwait(ep, evs, MAX_NODES + 1, -1, &waitmask);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_pwait");
        }
        for (int k = 0; k < n; k++) {
            if (evs[k].data.u32 == UINT32_MAX) {
                uint64_t expirations;
                (void)!read(tfd, &expirations, sizeof expirations);
                armed = UINT64_MAX; /* fired: re-arm for the next one */
            } else {
                /* Level-triggered: a device left non-empty wakes us again. */
                (void)drain((int)evs[k].data.u32, buf);
            }
        }
    }
    dump_stats();
    return 0;
}
