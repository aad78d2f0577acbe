// SPDX-License-Identifier: GPL-2.0
/*
 * SoftBW (USENIX ATC 2017) at a host's egress port: per-VM fulfilment accounting in a tc (clsact egress)
 * program that steers each packet to its VM's "unsatisfied" or "satisfied" htb class.
 *
 * Per VM (keyed by its IPv4 source address): guarantee B (bit/s) and the lag dT (ns) of SPEC section 6:
 * on each packet of P bytes, dT += tau - P*8/B, tau = time since the VM's previous packet; dT is clamped
 * to [-SOFTBW_LAG_MAX, +SOFTBW_LAG_MAX] so that neither an idle VM nor a long burst builds unbounded
 * credit/debt. dT >= 0 (the VM got less than B): the packet goes to the VM's unsatisfied class (htb prio 0,
 * served first, round robin between VMs); dT < 0 (over-satisfied): to its satisfied class (prio 1, only
 * spare capacity, round robin). The class is chosen through skb->priority (htb takes a leaf class id
 * there), so the htb needs no filter. Accounting is done at enqueue (offered packets), SoftBW's own data
 * plane does it at dequeue: the marking is that of a per-VM meter at the guarantee.
 * Layout mirrored in python/paccp/datapath/softbw/control.py.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char _license[] SEC("license") = "GPL";

#define ETH_P_IP 0x0800
#define SOFTBW_LAG_MAX 20000000LL /* 20 ms */

struct softbw_vm {
	__u64 rate_bps;   /* guarantee B */
	__u32 unsat_cls;  /* htb class id (major << 16 | minor) for dT >= 0 */
	__u32 sat_cls;    /* for dT < 0 */
};

struct softbw_state {
	struct bpf_spin_lock lock;
	__u32 pad;
	__s64 lag_ns;
	__u64 last_ns;
	__u64 unsat_bytes;
	__u64 sat_bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* IPv4 source address, network order */
	__type(value, struct softbw_vm);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} softbw_vms SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct softbw_state);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} softbw_state SEC(".maps");

SEC("tc")
int softbw_egress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct softbw_state init = {}, *st;
	struct softbw_vm *vm;
	__u64 now, cost;
	__s64 lag, tau;
	__u32 saddr;
	int unsat;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return 0; /* TC_ACT_OK: not IPv4, default class */
	saddr = ip->saddr;
	vm = bpf_map_lookup_elem(&softbw_vms, &saddr);
	if (!vm || !vm->rate_bps)
		return 0;
	st = bpf_map_lookup_elem(&softbw_state, &saddr);
	if (!st) {
		bpf_map_update_elem(&softbw_state, &saddr, &init, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&softbw_state, &saddr);
		if (!st)
			return 0;
	}
	now = bpf_ktime_get_ns();
	cost = (__u64)skb->len * 8ULL * 1000000000ULL / vm->rate_bps;
	bpf_spin_lock(&st->lock);
	tau = st->last_ns ? (__s64)(now - st->last_ns) : 0;
	lag = st->lag_ns + tau - (__s64)cost;
	if (lag > SOFTBW_LAG_MAX)
		lag = SOFTBW_LAG_MAX;
	if (lag < -SOFTBW_LAG_MAX)
		lag = -SOFTBW_LAG_MAX;
	unsat = st->lag_ns + tau >= 0; /* the VM was owed this packet when it arrived */
	st->lag_ns = lag;
	st->last_ns = now;
	if (unsat)
		st->unsat_bytes += skb->len;
	else
		st->sat_bytes += skb->len;
	bpf_spin_unlock(&st->lock);
	skb->priority = unsat ? vm->unsat_cls : vm->sat_cls;
	return 0;
}
