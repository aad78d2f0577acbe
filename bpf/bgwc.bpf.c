// SPDX-License-Identifier: GPL-2.0
/*
 * The MPTCP bandwidth-guarantee / work-conservation scheme (IEEE Access 2019) on the kernel's own MPTCP.
 *
 * - bgwc_sockops (cgroup sock_ops): every MPTCP subflow is a TCP socket of its connection's cgroup; at
 *   its active open the subflow's local address decides its class (bgwc_addr: BG or WC). BG subflows get
 *   DSCP EF (ToS 0xb8) and reno; WC subflows get DSCP CS1 (ToS 0x20) and the bgwc_wc congestion control.
 *   Switch ports classify on the ToS (u32) into strict-priority htb classes; the VM's egress htb limits
 *   its BG class to its guarantee.
 * - bgwc_wc (struct_ops TCP CC): Reno whose additive increase is alpha_w = (A_l / K)^2 segments per RTT
 *   (paper Eq. 7), so a VM's K WC subflows together compete like A_l Reno flows. A_l and K come from
 *   bgwc_vm, keyed by the subflow's cgroup id: K is the configured value, or (0) the VM's live WC
 *   subflows; policy 0 gives alpha_w = 1 (plain uncoupled Reno, the paper's "no policy").
 * - metering: both congestion controls add each ACK's newly acknowledged bytes (tcp_sock.bytes_acked) of a
 *   subflow to bgwc_bytes[the VM's cgroup id], for VMs in bgwc_vm: the bytes the VM's BG and WC subflows
 *   delivered, what the agent bills (subflow-level, so data the MPTCP scheduler re-sends on another
 *   subflow counts again, as it crossed the network again).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char _license[] SEC("license") = "GPL";

#define TCP_CA_CWR 2
#define TCP_NOTSENT_LOWAT 25
#define SOL_IP 0
#define IP_TOS 1
#define SOL_TCP 6
#define TCP_CONGESTION 13
#define TCP_CONG_NON_RESTRICTED 0x1
#define BGWC_BG 1
#define BGWC_WC 2
#define TOS_BG 0xb8
#define TOS_WC 0x20
#define AI_SHIFT 16

struct bgwc_class {
	__u32 cls; /* BGWC_BG or BGWC_WC */
	__u32 pad;
};

struct bgwc_vm {
	__u32 a_l;    /* competition level A_l (>= 1) */
	__u32 k_set;  /* K, or 0: count the VM's live WC subflows */
	__u32 k_live; /* live WC subflows (kept by the CC) */
	__u32 policy; /* 1: alpha_w = (A_l/K)^2; 0: alpha_w = 1 */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* IPv4 address, network order */
	__type(value, struct bgwc_class);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} bgwc_addr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64); /* cgroup v2 id of the VM */
	__type(value, struct bgwc_vm);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} bgwc_vm SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);   /* cgroup v2 id of the VM (one in bgwc_vm) */
	__type(value, __u64); /* bytes acknowledged on its subflows, monotonic while the entry lives */
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} bgwc_bytes SEC(".maps");

/*
 * [0]: the divisor applied to the WC subflows' pacing-rate estimate, 0/1 = the kernel's own estimate.
 * The kernel's only MPTCP scheduler ("default") sends each burst on the subflow with the least
 * sk_wmem_queued / pacing rate ("linger time"), i.e. like LeastRTT. bgwc_wc implements cong_control,
 * so the kernel leaves sk_pacing_rate to it; with no fq qdisc and no internal pacing (sk_pacing_status
 * stays NONE) the value paces nothing, but a smaller value makes a WC subflow's linger time longer, so
 * the scheduler prefers the BG subflow.
 * [1]: the factor by which BG subflows (bgwc_bg) raise the kernel's pacing-rate estimate, 0 = 1. TCP
 * small queues lets a socket keep pacing_rate / 1024 bytes (about 1 ms) below it; a BG subflow limited by
 * its VM's htb class drains that in ~1 ms x (pacing / guarantee), and on a loaded machine the TSQ
 * tasklet that refills it can run later than that, leaving the BG class idle below its guarantee.
 * [2]: TCP_NOTSENT_LOWAT (bytes) of WC subflows, 0 = unset: bounds the data the scheduler can park on a
 * WC subflow that drains at low priority (parked data holds the connection's send buffer and starves BG).
 * [3]: a fixed pacing-rate value (bytes/s) reported by every WC subflow, 0 = the (divided) estimate. With
 * the estimate, a WC subflow whose cwnd is small has a long linger time, is rarely fed, is then not
 * cwnd-limited and never grows (measured: one WC subflow takes all the spare capacity); with one value
 * for all, the scheduler feeds every WC subflow alike and their congestion controls decide the shares.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} bgwc_conf SEC(".maps");

struct wc_ca {
	__u64 vmid;
	__u32 bg; /* 1: a BG subflow (bgwc_bg: alpha 1, boosted pacing estimate) */
	__u32 pad;
	__u64 acc; /* additive-increase accumulator, in segments << AI_SHIFT */
	__u32 prior_cwnd;
	__u32 counted;
	__u64 acked; /* tcp_sock.bytes_acked already added to bgwc_bytes */
};

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct wc_ca *ca_of(const struct sock *sk)
{
	return (struct wc_ca *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

/* alpha_w in segments per RTT, << AI_SHIFT */
static __always_inline __u64 alpha_of(struct wc_ca *ca)
{
	__u64 vmid = ca->vmid;
	struct bgwc_vm *v = bpf_map_lookup_elem(&bgwc_vm, &vmid);
	__u64 a, k;

	if (ca->bg || !v || !v->policy)
		return 1ULL << AI_SHIFT;
	a = v->a_l ? v->a_l : 1;
	k = v->k_set ? v->k_set : v->k_live;
	if (k == 0)
		k = 1;
	return ((a * a) << AI_SHIFT) / (k * k);
}

static __always_inline void ca_init(struct sock *sk, __u32 bg)
{
	struct wc_ca *ca = ca_of(sk);
	struct cgroup *cg = sk->sk_cgrp_data.cgroup;
	struct bgwc_vm *v;
	__u64 vmid;

	ca->acc = 0;
	ca->prior_cwnd = 0;
	ca->counted = 0;
	ca->acked = tcp_sk(sk)->bytes_acked;
	ca->bg = bg;
	ca->vmid = cg ? cg->kn->id : 0;
	vmid = ca->vmid;
	v = bg ? 0 : bpf_map_lookup_elem(&bgwc_vm, &vmid);
	if (v) {
		__sync_fetch_and_add(&v->k_live, 1);
		ca->counted = 1;
	}
}

SEC("struct_ops/bgwc_init")
void BPF_PROG(bgwc_init, struct sock *sk)
{
	ca_init(sk, 0);
}

SEC("struct_ops/bgwc_bg_init")
void BPF_PROG(bgwc_bg_init, struct sock *sk)
{
	ca_init(sk, 1);
}

SEC("struct_ops/bgwc_release")
void BPF_PROG(bgwc_release, struct sock *sk)
{
	struct wc_ca *ca = ca_of(sk);
	__u64 vmid = ca->vmid;
	struct bgwc_vm *v;

	if (!ca->counted)
		return;
	v = bpf_map_lookup_elem(&bgwc_vm, &vmid);
	if (v && v->k_live > 0)
		__sync_fetch_and_add(&v->k_live, -1);
	ca->counted = 0;
}

/* Reno slow start, then alpha_w segments per window of acked segments. */
static __always_inline void wc_avoid(struct tcp_sock *tp, struct wc_ca *ca, __u32 acked)
{
	__u32 cwnd = tp->snd_cwnd;
	__u64 w, add;

	if (cwnd < tp->snd_ssthresh) {
		__u32 to = cwnd + acked;

		if (to > tp->snd_ssthresh)
			to = tp->snd_ssthresh;
		acked -= to - cwnd;
		cwnd = to;
	}
	if (acked) {
		ca->acc += (__u64)acked * alpha_of(ca);
		w = (__u64)(cwnd ? cwnd : 1) << AI_SHIFT;
		if (ca->acc >= w) {
			add = ca->acc / w;
			if (add > 64)
				add = 64;
			ca->acc -= add * w;
			cwnd += (__u32)add;
		}
	}
	if (cwnd > tp->snd_cwnd_clamp)
		cwnd = tp->snd_cwnd_clamp;
	tp->snd_cwnd = cwnd;
}

/* The kernel's pacing-rate estimate (tcp_update_pacing_rate): 200 % (slow start) or 120 % of cwnd/srtt. */
static __always_inline __u64 kernel_pacing(struct sock *sk, struct tcp_sock *tp)
{
	__u64 rate = (__u64)tp->mss_cache * ((1000000 / 100) << 3);
	__u32 n = tp->snd_cwnd > tp->packets_out ? tp->snd_cwnd : tp->packets_out;

	rate *= tp->snd_cwnd < tp->snd_ssthresh / 2 ? 200 : 120;
	rate *= n;
	if (tp->srtt_us)
		rate /= tp->srtt_us;
	return rate;
}

/* Add the subflow's bytes acknowledged since the last ACK to its VM's counter (VMs in bgwc_vm only). */
static __always_inline void meter(struct tcp_sock *tp, struct wc_ca *ca)
{
	__u64 now = tp->bytes_acked, zero = 0, vmid = ca->vmid;
	__u64 delta = now - ca->acked;
	__u64 *b;

	ca->acked = now;
	if (!delta || !bpf_map_lookup_elem(&bgwc_vm, &vmid))
		return; /* bytes of a subflow outside any VM are not counted later either */
	b = bpf_map_lookup_elem(&bgwc_bytes, &vmid);
	if (!b) {
		bpf_map_update_elem(&bgwc_bytes, &vmid, &zero, BPF_NOEXIST);
		b = bpf_map_lookup_elem(&bgwc_bytes, &vmid);
		if (!b)
			return;
	}
	__sync_fetch_and_add(b, delta);
}

static __always_inline void cong_control(struct sock *sk, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	struct wc_ca *ca = ca_of(sk);
	__u32 key = ca->bg ? 1 : 0;
	__u64 *conf = bpf_map_lookup_elem(&bgwc_conf, &key);
	__u64 rate;
	int acked = rs->acked_sacked;
	__u8 state;

	meter(tp, ca);
	/* A CC with cong_control gets no PRR from the kernel: without a reduction here cwnd held through
	 * recovery and was only set to ssthresh at its end, so a WC subflow kept sending at its full rate
	 * into a full low-priority queue (measured: 37 % of its bytes retransmitted, the other VM's WC
	 * subflow starved into RTO backoff). Reno's multiplicative decrease: cwnd = ssthresh on entering
	 * CWR/Recovery (tcp_enter_loss sets cwnd itself); no increase until it ends. */
	state = BPF_CORE_READ_BITFIELD(icsk, icsk_ca_state);
	if (state >= TCP_CA_CWR) {
		if (tp->snd_cwnd > tp->snd_ssthresh)
			tp->snd_cwnd = tp->snd_ssthresh > 2 ? tp->snd_ssthresh : 2;
	} else if (acked > 0 && BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited)) {
		wc_avoid(tp, ca, (__u32)acked);
	}
	__u32 three = 3;
	__u64 *fixed = ca->bg ? 0 : bpf_map_lookup_elem(&bgwc_conf, &three);

	rate = kernel_pacing(sk, tp);
	if (ca->bg)
		rate *= conf && *conf ? *conf : 1;
	else if (fixed && *fixed)
		rate = *fixed;
	else if (conf && *conf)
		rate /= *conf;
	if (rate > sk->sk_max_pacing_rate)
		rate = sk->sk_max_pacing_rate;
	sk->sk_pacing_rate = rate;
}

SEC("struct_ops/bgwc_cong_control")
void BPF_PROG(bgwc_cong_control, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	cong_control(sk, rs);
}

SEC("struct_ops/bgwc_bg_cong_control")
void BPF_PROG(bgwc_bg_cong_control, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	cong_control(sk, rs);
}

static __always_inline __u32 ssthresh(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct wc_ca *ca = ca_of(sk);
	__u32 half = tp->snd_cwnd >> 1;

	ca->prior_cwnd = tp->snd_cwnd;
	ca->acc = 0;
	return half > 2 ? half : 2;
}

static __always_inline __u32 undo(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct wc_ca *ca = ca_of(sk);

	return tp->snd_cwnd > ca->prior_cwnd ? tp->snd_cwnd : ca->prior_cwnd;
}

SEC("struct_ops/bgwc_ssthresh")
__u32 BPF_PROG(bgwc_ssthresh, struct sock *sk)
{
	return ssthresh(sk);
}

SEC("struct_ops/bgwc_undo_cwnd")
__u32 BPF_PROG(bgwc_undo_cwnd, struct sock *sk)
{
	return undo(sk);
}

SEC("struct_ops/bgwc_bg_ssthresh")
__u32 BPF_PROG(bgwc_bg_ssthresh, struct sock *sk)
{
	return ssthresh(sk);
}

SEC("struct_ops/bgwc_bg_undo_cwnd")
__u32 BPF_PROG(bgwc_bg_undo_cwnd, struct sock *sk)
{
	return undo(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops bgwc_ops = {
	.init = (void *)bgwc_init,
	.release = (void *)bgwc_release,
	.cong_control = (void *)bgwc_cong_control,
	.ssthresh = (void *)bgwc_ssthresh,
	.undo_cwnd = (void *)bgwc_undo_cwnd,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "bgwc_wc",
};

/* BG subflows: uncoupled Reno as the paper, with the pacing-rate estimate raised by bgwc_conf[1]. */
SEC(".struct_ops")
struct tcp_congestion_ops bgwc_bg_ops = {
	.init = (void *)bgwc_bg_init,
	.cong_control = (void *)bgwc_bg_cong_control,
	.ssthresh = (void *)bgwc_bg_ssthresh,
	.undo_cwnd = (void *)bgwc_bg_undo_cwnd,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "bgwc_bg",
};

/* sockops: class (ToS, congestion control) of each subflow from its local address, at its active open. */
SEC("sockops")
int bgwc_sockops(struct bpf_sock_ops *skops)
{
	char wc[] = "bgwc_wc";
	char bg[] = "bgwc_bg";
	struct bgwc_class *c;
	__u32 addr;
	int tos;

	if (skops->op != BPF_SOCK_OPS_TCP_CONNECT_CB)
		return 1;
	addr = skops->local_ip4;
	c = bpf_map_lookup_elem(&bgwc_addr, &addr);
	if (!c)
		return 1;
	if (c->cls == BGWC_WC) {
		__u32 two = 2;
		__u64 *lowat = bpf_map_lookup_elem(&bgwc_conf, &two);

		tos = TOS_WC;
		bpf_setsockopt(skops, SOL_IP, IP_TOS, &tos, sizeof(tos));
		bpf_setsockopt(skops, SOL_TCP, TCP_CONGESTION, wc, sizeof(wc));
		if (lowat && *lowat) {
			int v = (int)*lowat;

			bpf_setsockopt(skops, SOL_TCP, TCP_NOTSENT_LOWAT, &v, sizeof(v));
		}

	} else if (c->cls == BGWC_BG) {
		tos = TOS_BG;
		bpf_setsockopt(skops, SOL_IP, IP_TOS, &tos, sizeof(tos));
		bpf_setsockopt(skops, SOL_TCP, TCP_CONGESTION, bg, sizeof(bg));
	}
	return 1;
}
