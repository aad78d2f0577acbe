/* A full-duplex link emulator between two interfaces of one namespace (the kernel has no netem).
 *
 *   linkemu IF_A IF_B RATE_BPS DELAY_NS LIMIT_PKTS
 *
 * Every frame received on IF_A leaves on IF_B (and the other way) as it would on a link of RATE_BPS
 * with a drop-tail buffer of LIMIT_PKTS frames (the frame being serialised counts, as in the engine)
 * and a propagation delay of DELAY_NS: departure = max(arrival, previous departure) + bytes * 8 / rate,
 * delivery = departure + delay. Frames are counted as the wire has them (Ethernet header included).
 * AF_PACKET sockets with PACKET_VNET_HDR, so a frame's pending checksum (veth leaves TCP checksums to
 * the "hardware") travels with it. On SIGTERM/SIGINT it prints per direction: frames, bytes, drops.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SLOT 2048
#define RING 8192
#define VNET ((int)sizeof(struct virtio_net_hdr))

struct frame {
    uint64_t depart, deliver;
    int len;
    unsigned char buf[SLOT];
};

struct dir {
    int in, out;
    struct frame *ring;
    unsigned head, tail; /* [head, tail) queued, oldest first */
    uint64_t last_depart, frames, bytes, drops, too_big;
};

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s; stop = 1; }

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int open_if(const char *name) {
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
    if (fd < 0) { perror("socket"); exit(1); }
    int one = 1, big = 8 << 20;
    if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) < 0) { perror("vnet_hdr"); exit(1); }
    if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0) { perror("ignore_out"); exit(1); }
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big);
    struct sockaddr_ll a = {0};
    a.sll_family = AF_PACKET;
    a.sll_protocol = htons(ETH_P_ALL);
    a.sll_ifindex = (int)if_nametoindex(name);
    if (!a.sll_ifindex) { fprintf(stderr, "no interface %s\n", name); exit(1); }
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) { perror("bind"); exit(1); }
    return fd;
}

/* Send every frame whose delivery time has come. */
static void deliver(struct dir *d, uint64_t now) {
    while (d->head != d->tail) {
        struct frame *f = &d->ring[d->head % RING];
        if (f->deliver > now) break;
        if (send(d->out, f->buf, (size_t)f->len, 0) < 0 && errno != ENOBUFS && errno != EAGAIN)
            perror("send");
        d->head++;
    }
}

static void receive(struct dir *d, uint64_t rate, uint64_t delay, unsigned limit) {
    static unsigned char tmp[65536 + 64];
    for (;;) {
        ssize_t n = recv(d->in, tmp, sizeof tmp, 0);
        if (n < 0) return;
        uint64_t now = now_ns();
        int wire = (int)n - VNET;
        if (n > SLOT || wire <= 0) { d->too_big++; continue; }
        /* frames still waiting for (or in) serialisation */
        unsigned queued = 0;
        for (unsigned i = d->tail; i != d->head && d->ring[(i - 1) % RING].depart > now; i--) queued++;
        if (queued >= limit || d->tail - d->head >= RING) { d->drops++; continue; }
        uint64_t start = d->last_depart > now ? d->last_depart : now;
        struct frame *f = &d->ring[d->tail % RING];
        f->depart = start + (uint64_t)wire * 8ull * 1000000000ull / rate;
        f->deliver = f->depart + delay;
        f->len = (int)n;
        memcpy(f->buf, tmp, (size_t)n);
        d->last_depart = f->depart;
        d->tail++;
        d->frames++;
        d->bytes += (uint64_t)wire;
    }
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s IF_A IF_B RATE_BPS DELAY_NS LIMIT_PKTS\n", argv[0]);
        return 2;
    }
    uint64_t rate = strtoull(argv[3], 0, 10), delay = strtoull(argv[4], 0, 10);
    unsigned limit = (unsigned)strtoul(argv[5], 0, 10);
    if (!rate || !limit) { fprintf(stderr, "rate and limit must be > 0\n"); return 2; }
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    int a = open_if(argv[1]), b = open_if(argv[2]);
    struct dir dirs[2] = {{.in = a, .out = b}, {.in = b, .out = a}};
    for (int i = 0; i < 2; i++) {
        dirs[i].ring = calloc(RING, sizeof(struct frame));
        if (!dirs[i].ring) { perror("calloc"); return 1; }
    }
    struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
    while (!stop) {
        uint64_t now = now_ns(), next = UINT64_MAX;
        for (int i = 0; i < 2; i++) {
            deliver(&dirs[i], now);
            if (dirs[i].head != dirs[i].tail) {
                uint64_t t = dirs[i].ring[dirs[i].head % RING].deliver;
                if (t < next) next = t;
            }
        }
        struct timespec ts = {1, 0};
        if (next != UINT64_MAX) {
            uint64_t w = next > now ? next - now : 0;
            ts.tv_sec = (time_t)(w / 1000000000ull);
            ts.tv_nsec = (long)(w % 1000000000ull);
        }
        int r = ppoll(p, 2, &ts, NULL);
        if (r < 0 && errno != EINTR) { perror("ppoll"); return 1; }
        if (r > 0) {
            for (int i = 0; i < 2; i++)
                if (p[i].revents & POLLIN) receive(&dirs[i], rate, delay, limit);
        }
    }
    printf("{\"a_to_b\": {\"frames\": %llu, \"bytes\": %llu, \"drops\": %llu, \"too_big\": %llu}, "
           "\"b_to_a\": {\"frames\": %llu, \"bytes\": %llu, \"drops\": %llu, \"too_big\": %llu}}\n",
           (unsigned long long)dirs[0].frames, (unsigned long long)dirs[0].bytes,
           (unsigned long long)dirs[0].drops, (unsigned long long)dirs[0].too_big,
           (unsigned long long)dirs[1].frames, (unsigned long long)dirs[1].bytes,
           (unsigned long long)dirs[1].drops, (unsigned long long)dirs[1].too_big);
    fflush(stdout);
    return 0;
}
