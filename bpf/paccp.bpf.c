// SPDX-License-Identifier: GPL-2.0
/*
 * PACCP as a BPF struct_ops TCP congestion control ("paccp") plus a sockops program that selects it for
 * the connections of a VM's cgroup. Control law: paccp_law.h (SPEC section 3), applied per ACK.
 *
 * Parameters are resolved on every cong_avoid call (so run-time changes reach live flows):
 *   per-socket sk_storage (paccp_sk_par, root only) > flow rule owned by the socket's cgroup or one of
 *   its two nearest ancestors (paccp_rules keyed by (owner cgroup, port): destination port, then local
 *   port) > host-wide rule (owner 0, set explicitly) > the VM's pair (paccp_vm_cfg of the socket's cgroup
 *   or an ancestor) split equally over the VM's active paccp flows (VBP) > default BE (theta 0, omega 1).
 * A socket's cgroup is the cgroup v2 of the process that created it (inherited by accepted sockets from
 * the listener); a process outside the owner's cgroup never matches the owner's rule, whatever its port.
 * Metering: per flow (paccp_flows), per VM (paccp_vm_state) and per (flow|VM, pair) slices (paccp_slices),
 * updated on each ACK. When a VM's cgroup is removed, a tracepoint program closes its open slice and
 * drops its state and pair (paccp_gone keeps when). Layouts are mirrored in python/paccp/datapath/paccp/maps.py.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "paccp_law.h"

char _license[] SEC("license") = "GPL";

#define SOL_TCP 6
#define TCP_CONGESTION 13
#define TCP_CONG_NON_RESTRICTED 0x1
#define PACCP_MIN_CWND_SEG 2 /* floor of the decreased window, as Reno (see README) */
#define PACCP_MAX_ACK_LOOP 256
/* TCP_INFINITE_SSTHRESH: no legitimate ssthresh is larger */
#define PACCP_INFINITE_SSTHRESH 0x7fffffff
/* VBP: a flow counts as active in its VM once this much was acked and it is cwnd-limited */
#define PACCP_ACTIVE_BYTES (64 * 1024)

enum paccp_src { SRC_DEFAULT = 0, SRC_VM = 1, SRC_RULE = 2, SRC_SOCKET = 3 };
enum paccp_kind { KIND_FLOW = 0, KIND_VM = 1 };

struct paccp_params {
	__u64 theta_bps;
	__u32 omega_q20;
	__u32 flags; /* 1 = set */
};

/* A flow rule's key: owner cgroup id (0 = host-wide) and port. */
struct paccp_rule_key {
	__u64 owner;
	__u32 port;
	__u32 pad;
};

struct paccp_vm_state {
	__u32 active;
	__u32 pad;
	__u64 bytes_acked;
	__u64 pair_theta;
	__u32 pair_omega;
	__u32 pad2;
	__u64 pair_since_ns;
	__u64 pair_bytes0;
};

struct paccp_flow {
	__u64 cgid;
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u32 ended;
	__u64 theta_bps; /* effective (after VBP split) */
	__u32 omega_q20; /* effective */
	__u32 source;
	__u32 cwnd;
	__u32 srtt_us;
	__u64 wmin_q20;
	__u64 bytes_acked;
	__u64 start_ns;
	__u64 last_ns;
	__u64 pair_since_ns;
	__u64 pair_bytes0;
	__u64 netns;
	__u64 vmid; /* the VM (cgroup with a pair) the flow is attributed to; 0 = outside any VM */
};

/* One closed (theta, omega) interval of a flow or a cgroup: [start_ns, start_ns + ns). */
struct paccp_slice_key {
	__u64 id;
	__u64 theta_bps;
	__u32 omega_q20;
	__u32 kind;
	__u64 start_ns;
};

struct paccp_slice {
	__u64 ns;
	__u64 bytes;
};

struct paccp_global {
	__u64 rcos_q20;
	__u64 next_flow_id;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct paccp_params);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} paccp_sk_par SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct paccp_rule_key);
	__type(value, struct paccp_params);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} paccp_rules SEC(".maps");

/* number of rules in paccp_rules (written by user space): 0 skips the rule lookups. A map of its own so
 * that user space never rewrites paccp_global, whose next_flow_id the BPF side increments. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} paccp_nrules SEC(".maps");

/* cgroup id -> monotonic ns of its removal (VMs whose slice the rmdir tracepoint closed) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} paccp_gone SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct paccp_params);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} paccp_vm_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct paccp_vm_state);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} paccp_vm_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct paccp_flow);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} paccp_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct paccp_slice_key);
	__type(value, struct paccp_slice);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} paccp_slices SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct paccp_global);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} paccp_global SEC(".maps");

/* Congestion-control state in inet_csk_ca (must stay <= ICSK_CA_PRIV_SIZE = 104 bytes). */
struct paccp_ca {
	__u64 flow_id;
	__u64 cgid;       /* the socket's cgroup v2 id */
	__u64 anc[2];     /* its parent's and grandparent's ids (0 = none) */
	__u64 vmid;       /* the VM it is attributed to, once found (0 = none yet) */
	__u64 omega_cached; /* omega for which p3_cached is valid (Q20, +1 so 0 means none) */
	__u64 p3_cached;
	__u64 last_bytes; /* tp->bytes_acked at the last metering */
	__u32 frac;       /* fractional window remainder (Q20) */
	__u32 last_cwnd;  /* snd_cwnd when frac was stored */
	__u32 prior_cwnd;
	__u32 counted;    /* counted in paccp_vm_state.active */
	__u32 in_ss;      /* slow start at the last cong_avoid (for repair_ssthresh) */
};

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct paccp_ca *ca_of(const struct sock *sk)
{
	return (struct paccp_ca *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline int in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

static __always_inline int cwnd_limited(const struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	if (in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return !!BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
}

static __always_inline __u64 rcos_q20(void)
{
	__u32 zero = 0;
	struct paccp_global *g = bpf_map_lookup_elem(&paccp_global, &zero);

	if (g && g->rcos_q20 >= PACCP_ONE)
		return g->rcos_q20;
	return PACCP_RCOS_DEFAULT;
}

static __always_inline __u64 cg_id(struct cgroup *cg)
{
	return cg ? cg->kn->id : 0;
}

static __always_inline struct cgroup *cg_parent(struct cgroup *cg)
{
	struct cgroup_subsys_state *p = cg ? cg->self.parent : 0;

	return p ? p->cgroup : 0;
}

/* The VM of a socket: its own cgroup or the nearest of two ancestors with a pair; cached once found. */
static __always_inline __u64 vm_of(struct paccp_ca *ca)
{
	__u64 ids[3] = {ca->cgid, ca->anc[0], ca->anc[1]};
	int i;

	if (ca->vmid)
		return ca->vmid;
	for (i = 0; i < 3; i++) {
		__u64 id = ids[i];

		if (id && bpf_map_lookup_elem(&paccp_vm_cfg, &id)) {
			ca->vmid = id;
			return id;
		}
	}
	return 0;
}

static __always_inline struct paccp_params *rule_for(struct paccp_ca *ca, __u32 port)
{
	struct paccp_rule_key k = {};
	struct paccp_params *p;
	__u64 ids[4] = {ca->cgid, ca->anc[0], ca->anc[1], 0};
	int i;

	k.port = port;
	for (i = 0; i < 4; i++) {
		if (i < 3 && !ids[i])
			continue;
		k.owner = ids[i];
		p = bpf_map_lookup_elem(&paccp_rules, &k);
		if (p && p->flags && p->omega_q20)
			return p;
	}
	return 0;
}

static __always_inline __u64 n_rules(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&paccp_nrules, &zero);

	return n ? *n : 0;
}

/* Resolve the effective (theta, omega) of a socket; returns the source (enum paccp_src). */
static __always_inline __u32 resolve(struct sock *sk, struct paccp_ca *ca, __u64 *theta, __u64 *omega)
{
	struct paccp_params *p;
	__u64 vmid;

	p = bpf_sk_storage_get(&paccp_sk_par, sk, 0, 0);
	if (p && p->flags && p->omega_q20) {
		*theta = p->theta_bps;
		*omega = p->omega_q20;
		return SRC_SOCKET;
	}
	if (n_rules()) {
		p = rule_for(ca, bpf_ntohs(sk->__sk_common.skc_dport));
		if (!p)
			p = rule_for(ca, sk->__sk_common.skc_num);
		if (p) {
			*theta = p->theta_bps;
			*omega = p->omega_q20;
			return SRC_RULE;
		}
	}
	vmid = vm_of(ca);
	if (vmid) {
		p = bpf_map_lookup_elem(&paccp_vm_cfg, &vmid);
		if (p && p->flags && p->omega_q20) {
			struct paccp_vm_state *st = bpf_map_lookup_elem(&paccp_vm_state, &vmid);
			__u32 n = st ? st->active : 1;

			if (n == 0)
				n = 1;
			*theta = p->theta_bps / n;
			*omega = p->omega_q20 / n;
			if (*omega == 0)
				*omega = 1;
			return SRC_VM;
		}
	}
	*theta = 0;
	*omega = PACCP_ONE;
	return SRC_DEFAULT;
}

static __always_inline void add_slice(__u64 id, __u32 kind, __u64 theta, __u32 omega, __u64 start,
				      __u64 now, __u64 bytes)
{
	struct paccp_slice_key k = {};
	struct paccp_slice v = {};

	if (!omega || now <= start)
		return; /* no pair yet, or an empty interval */
	k.id = id;
	k.kind = kind;
	k.theta_bps = theta;
	k.omega_q20 = omega;
	k.start_ns = start;
	v.ns = now - start;
	v.bytes = bytes;
	bpf_map_update_elem(&paccp_slices, &k, &v, BPF_ANY);
}

/* Per-flow and per-cgroup metering; closes a (theta, omega) slice when the pair changed. */
static __always_inline void meter(struct sock *sk, struct paccp_ca *ca, __u64 theta, __u64 omega, __u32 src,
			 __u64 wmin, int ended)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 now = bpf_ktime_get_ns();
	__u64 fid = ca->flow_id;
	__u64 bytes = tp->bytes_acked;
	__u64 delta = bytes - ca->last_bytes;
	struct paccp_flow *f;

	ca->last_bytes = bytes;
	f = bpf_map_lookup_elem(&paccp_flows, &fid);
	if (f) {
		if (f->theta_bps != theta || f->omega_q20 != omega) {
			add_slice(fid, KIND_FLOW, f->theta_bps, f->omega_q20, f->pair_since_ns, now,
				  bytes - f->pair_bytes0);
			f->theta_bps = theta;
			f->omega_q20 = (__u32)omega;
			f->pair_since_ns = now;
			f->pair_bytes0 = bytes;
		}
		f->source = src;
		f->cwnd = tp->snd_cwnd;
		f->srtt_us = tp->srtt_us >> 3;
		if (!ended)
			f->wmin_q20 = wmin;
		f->bytes_acked = bytes;
		f->last_ns = now;
		if (ended) {
			add_slice(fid, KIND_FLOW, theta, (__u32)omega, f->pair_since_ns, now,
				  bytes - f->pair_bytes0);
			f->pair_since_ns = now;
			f->pair_bytes0 = bytes;
			f->ended = 1;
		}
		f->vmid = ca->vmid;
	}
	if (ca->vmid) {
		__u64 cgid = ca->vmid;
		struct paccp_vm_state *st = bpf_map_lookup_elem(&paccp_vm_state, &cgid);
		struct paccp_params *cfg = bpf_map_lookup_elem(&paccp_vm_cfg, &cgid);
		__u64 ct = 0;
		__u32 co = PACCP_ONE;

		if (cfg && cfg->flags && cfg->omega_q20) {
			ct = cfg->theta_bps;
			co = cfg->omega_q20;
		}
		if (st) {
			__sync_fetch_and_add(&st->bytes_acked, delta);
			if (st->pair_theta != ct || st->pair_omega != co) {
				__u64 b = st->bytes_acked;

				add_slice(cgid, KIND_VM, st->pair_theta, st->pair_omega, st->pair_since_ns,
					  now, b - st->pair_bytes0);
				st->pair_theta = ct;
				st->pair_omega = co;
				st->pair_since_ns = now;
				st->pair_bytes0 = b;
			}
		}
	}
}

/*
 * Count a flow as active in its cgroup (VBP) once it has had PACCP_ACTIVE_BYTES acked and is
 * cwnd-limited, so small control connections (e.g. iperf3's, even at cwnd 1 after a timeout) do not
 * take a share; it stays counted until it closes (release).
 */
static __always_inline void count_active(struct paccp_ca *ca)
{
	struct paccp_vm_state *st;
	__u64 cgid = vm_of(ca);

	if (!cgid || ca->counted)
		return;
	/* the state exists from `vm set` (user space) or the VM's first flow; never recreated here, so a
	 * removed VM's orphan sockets do not bring its metering back */
	st = bpf_map_lookup_elem(&paccp_vm_state, &cgid);
	if (st) {
		__sync_fetch_and_add(&st->active, 1);
		ca->counted = 1;
	}
}

static __always_inline __u64 pow3_cached(struct paccp_ca *ca, __u64 omega)
{
	if (ca->omega_cached != omega + 1) {
		ca->p3_cached = paccp_pow3_1m(omega);
		ca->omega_cached = omega + 1;
	}
	return ca->p3_cached;
}

static __always_inline __u64 wmin_of(struct sock *sk, __u64 theta)
{
	struct tcp_sock *tp = tcp_sk(sk);

	/* srtt_us holds 8 x the smoothed RTT in microseconds: x125 gives ns */
	return paccp_wmin(theta, (__u64)tp->srtt_us * 125, tp->mss_cache);
}

struct ack_loop {
	__u64 w, ssth, wmin, omega, rcos, p3;
};

/* One acknowledged segment (bpf_loop callback): the regime is re-evaluated before every segment. */
static long ack_step(__u32 index, void *data)
{
	struct ack_loop *c = data;

	c->w = paccp_ack_one(c->w, c->w < c->ssth, c->wmin, c->omega, c->rcos, c->p3, PACCP_ONE);
	return 0;
}

/* The decreased window (= the new ssthresh) of a loss event at window cw; resets the window carry. */
static __always_inline __u32 loss_ssthresh(struct sock *sk, struct paccp_ca *ca, __u32 cw, int ss)
{
	__u64 theta = 0, omega = PACCP_ONE, w, r;

	resolve(sk, ca, &theta, &omega);
	w = (__u64)cw << PACCP_SHIFT;
	if (cw == ca->last_cwnd)
		w += ca->frac;
	r = paccp_loss(w, ss, omega, pow3_cached(ca, omega), (__u64)PACCP_MIN_CWND_SEG << PACCP_SHIFT);
	ca->prior_cwnd = cw;
	ca->frac = 0;
	ca->last_cwnd = 0;
	return (__u32)(r >> PACCP_SHIFT);
}

/*
 * On the test machine's kernel (6.18) a loss event now and then (about one per 10 s of two-VM contention)
 * leaves snd_ssthresh = 0x822034e5, the low half of the kernel return address srso_return_thunk+5 (a
 * stale stack word), without our ssthresh having run (its window carry is untouched; recursion_misses
 * stays 0) and without set_state seeing it. PRR then reads ssthresh - in_flight as a negative int and
 * grows cwnd by ssthresh/prior_cwnd per delivered segment (to 10^9 within milliseconds); after recovery
 * the flow is no longer cwnd-limited and the law stops governing it until its next loss. No legitimate
 * ssthresh exceeds TCP_INFINITE_SSTHRESH: recompute it from the window at the loss (tp->prior_cwnd, set
 * by the kernel when the reduction began) and the regime of the last cong_avoid. Checked on every ACK
 * (pkts_acked runs before the kernel's PRR step of the ACK), so at most one PRR step uses the bad value.
 */
static __always_inline void repair_ssthresh(struct sock *sk, struct paccp_ca *ca)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (tp->snd_ssthresh > PACCP_INFINITE_SSTHRESH)
		tp->snd_ssthresh = loss_ssthresh(sk, ca, tp->prior_cwnd, ca->in_ss);
}

SEC("struct_ops/paccp_init")
void BPF_PROG(paccp_init, struct sock *sk)
{
	struct paccp_ca *ca = ca_of(sk);
	struct cgroup *cg = sk->sk_cgrp_data.cgroup;
	struct paccp_global *g;
	struct paccp_flow f = {};
	__u32 zero = 0;
	__u64 fid = 0;

	ca->frac = 0;
	ca->last_cwnd = 0;
	ca->omega_cached = 0;
	ca->last_bytes = tcp_sk(sk)->bytes_acked;
	ca->counted = 0;
	ca->in_ss = 0;
	ca->vmid = 0;
	/* the socket's own cgroup (not the current task's: passive opens run in softirq context) */
	ca->cgid = cg_id(cg);
	cg = cg_parent(cg);
	ca->anc[0] = cg_id(cg);
	ca->anc[1] = cg_id(cg_parent(cg));
	if (vm_of(ca)) {
		/* per-VM metering exists from the VM's first flow on, active or not */
		struct paccp_vm_state vinit = {};
		__u64 vmid = ca->vmid;

		bpf_map_update_elem(&paccp_vm_state, &vmid, &vinit, BPF_NOEXIST);
	}
	g = bpf_map_lookup_elem(&paccp_global, &zero);
	if (g)
		fid = __sync_fetch_and_add(&g->next_flow_id, 1) + 1;
	ca->flow_id = fid;
	f.cgid = ca->cgid;
	f.saddr = sk->__sk_common.skc_rcv_saddr;
	f.daddr = sk->__sk_common.skc_daddr;
	f.sport = sk->__sk_common.skc_num;
	f.dport = bpf_ntohs(sk->__sk_common.skc_dport);
	f.start_ns = bpf_ktime_get_ns();
	f.last_ns = f.start_ns;
	f.pair_since_ns = f.start_ns;
	f.pair_bytes0 = ca->last_bytes;
	f.bytes_acked = ca->last_bytes;
	f.netns = sk->__sk_common.skc_net.net->net_cookie;
	f.vmid = ca->vmid;
	if (fid)
		bpf_map_update_elem(&paccp_flows, &fid, &f, BPF_ANY);
}

SEC("struct_ops/paccp_release")
void BPF_PROG(paccp_release, struct sock *sk)
{
	struct paccp_ca *ca = ca_of(sk);
	__u64 theta = 0, omega = PACCP_ONE;
	__u32 src;

	src = resolve(sk, ca, &theta, &omega);
	meter(sk, ca, theta, omega, src, 0, 1);
	if (ca->counted && ca->vmid) {
		__u64 cgid = ca->vmid;
		struct paccp_vm_state *st = bpf_map_lookup_elem(&paccp_vm_state, &cgid);

		if (st && st->active > 0)
			__sync_fetch_and_add(&st->active, -1);
		ca->counted = 0;
	}
}

SEC("struct_ops/paccp_cong_avoid")
void BPF_PROG(paccp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct paccp_ca *ca = ca_of(sk);
	__u64 theta = 0, omega = PACCP_ONE, wmin, rcos, p3, w, ssth;
	struct ack_loop lc = {};
	__u32 src, n, cw;

	if (tp->bytes_acked >= PACCP_ACTIVE_BYTES && cwnd_limited(sk))
		count_active(ca);
	src = resolve(sk, ca, &theta, &omega);
	wmin = wmin_of(sk, theta);
	meter(sk, ca, theta, omega, src, wmin, 0);
	ca->in_ss = in_slow_start(tp);
	if (!cwnd_limited(sk))
		return;
	rcos = rcos_q20();
	p3 = pow3_cached(ca, omega);
	cw = tp->snd_cwnd;
	w = (__u64)cw << PACCP_SHIFT;
	if (cw == ca->last_cwnd)
		w += ca->frac;
	ssth = (__u64)tp->snd_ssthresh << PACCP_SHIFT;
	n = acked;
	if (n > PACCP_MAX_ACK_LOOP)
		n = PACCP_MAX_ACK_LOOP;
	lc.w = w;
	lc.ssth = ssth;
	lc.wmin = wmin;
	lc.omega = omega;
	lc.rcos = rcos;
	lc.p3 = p3;
	bpf_loop(n, ack_step, &lc, 0);
	w = lc.w;
	cw = (__u32)(w >> PACCP_SHIFT);
	if (cw > tp->snd_cwnd_clamp) {
		cw = tp->snd_cwnd_clamp;
		w = (__u64)cw << PACCP_SHIFT;
	}
	tp->snd_cwnd = cw;
	ca->frac = (__u32)(w & (PACCP_ONE - 1));
	ca->last_cwnd = cw;
}

SEC("struct_ops/paccp_ssthresh")
__u32 BPF_PROG(paccp_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	return loss_ssthresh(sk, ca_of(sk), tp->snd_cwnd, in_slow_start(tp));
}

/* A state change (entering CWR, Recovery or Loss follows a call of ssthresh). */
SEC("struct_ops/paccp_set_state")
void BPF_PROG(paccp_set_state, struct sock *sk, __u8 new_state)
{
	repair_ssthresh(sk, ca_of(sk));
}

/* Every ACK, also in recovery, before the kernel's PRR step of that ACK. */
SEC("struct_ops/paccp_pkts_acked")
void BPF_PROG(paccp_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	repair_ssthresh(sk, ca_of(sk));
}

SEC("struct_ops/paccp_undo_cwnd")
__u32 BPF_PROG(paccp_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct paccp_ca *ca = ca_of(sk);

	return tp->snd_cwnd > ca->prior_cwnd ? tp->snd_cwnd : ca->prior_cwnd;
}

SEC(".struct_ops")
struct tcp_congestion_ops paccp_ops = {
	.init = (void *)paccp_init,
	.release = (void *)paccp_release,
	.cong_avoid = (void *)paccp_cong_avoid,
	.ssthresh = (void *)paccp_ssthresh,
	.undo_cwnd = (void *)paccp_undo_cwnd,
	.set_state = (void *)paccp_set_state,
	.pkts_acked = (void *)paccp_pkts_acked,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "paccp",
};

/* sockops: select paccp for the connections of a VM cgroup (active and passive opens). */
SEC("sockops")
int paccp_sockops(struct bpf_sock_ops *skops)
{
	char name[] = "paccp";

	if (skops->op != BPF_SOCK_OPS_TCP_CONNECT_CB && skops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB)
		return 1;
	bpf_setsockopt(skops, SOL_TCP, TCP_CONGESTION, name, sizeof(name));
	return 1;
}

/*
 * cgroup/setsockopt guard on VM cgroups: a VM's process may not switch its sockets away from paccp
 * (setsockopt(TCP_CONGESTION) to anything but "paccp" fails with EPERM), so the congestion control the
 * host chose (and the pair it enforces) cannot be dropped from inside a container. Kernel-internal
 * changes (bpf_setsockopt from sockops) do not pass through this hook.
 */
SEC("cgroup/setsockopt")
int paccp_cc_guard(struct bpf_sockopt *ctx)
{
	char *v = ctx->optval;

	if (ctx->level != SOL_TCP || ctx->optname != TCP_CONGESTION)
		goto pass;
	if (v + 6 > (char *)ctx->optval_end)
		return 0;
	if (v[0] == 'p' && v[1] == 'a' && v[2] == 'c' && v[3] == 'c' && v[4] == 'p' &&
	    (v[5] == 0 || ctx->optlen == 5))
		goto pass;
	return 0;
pass:
	/* optval stays as the caller gave it (a page at most is visible here) */
	if (ctx->optlen > 4096)
		ctx->optlen = -1;
	return 1;
}

/*
 * Metering lifecycle: when a cgroup is removed, close its VM slice (the final usage record of the VM),
 * drop its metering state and pair, and remember when (user space drops rules it owned).
 */
SEC("tp_btf/cgroup_rmdir")
int BPF_PROG(paccp_cg_rmdir, struct cgroup *cgrp, const char *path)
{
	__u64 cgid = cg_id(cgrp);
	__u64 now = bpf_ktime_get_ns();
	struct paccp_vm_state *st;
	int had;

	if (!cgid)
		return 0;
	st = bpf_map_lookup_elem(&paccp_vm_state, &cgid);
	had = bpf_map_delete_elem(&paccp_vm_cfg, &cgid) == 0;
	if (st) {
		add_slice(cgid, KIND_VM, st->pair_theta, st->pair_omega, st->pair_since_ns, now,
			  st->bytes_acked - st->pair_bytes0);
		bpf_map_delete_elem(&paccp_vm_state, &cgid);
		had = 1;
	}
	if (had)
		bpf_map_update_elem(&paccp_gone, &cgid, &now, BPF_ANY);
	return 0;
}
