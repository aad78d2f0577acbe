// SPDX-License-Identifier: GPL-2.0
/*
 * PACCP enforced by the host (issue 26): the host side of each VM's interface (veth or tap).
 *
 * host_vm_in (tc clsact ingress of a VM's host-side interface: what the guest sends). Keyed by the
 * interface the packet came in on, never by an address the guest writes, so a guest cannot move its
 * traffic to another VM's class by spoofing. Counts the VM's offered packets and bytes (the host's own
 * meter, for usage records and Prometheus) and stamps skb->mark with the VM's htb class id
 * (major << 16 | minor). The mark is the host's: crossing a veth from the guest's namespace scrubs it
 * and a tap guest cannot set it.
 *
 * host_port_out (tc clsact egress of the host's port): a packet whose mark is a class of the port's htb
 * (major HOST_HTB_MAJOR) goes to that class through skb->priority (htb takes a leaf class id there);
 * anything else (the host's own traffic) goes to the htb's default class. ip_forward rewrites
 * skb->priority from the TOS byte but keeps the mark, hence the two steps.
 *
 * Layout mirrored in python/paccp/datapath/host/maps.py.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char _license[] SEC("license") = "GPL";

#define HOST_HTB_MAJOR 0x1

struct host_vm {
	__u32 classid; /* the VM's htb leaf on the port */
	__u32 pad;
	__u64 packets; /* offered by the guest (counted at the interface, before any queue) */
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* ifindex of the VM's host-side interface (in the host's namespace) */
	__type(value, struct host_vm);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} host_vms SEC(".maps");

SEC("tc")
int host_vm_in(struct __sk_buff *skb)
{
	__u32 ifindex = skb->ifindex;
	struct host_vm *vm = bpf_map_lookup_elem(&host_vms, &ifindex);

	if (!vm)
		return 0; /* TC_ACT_OK: not a VM's interface */
	__sync_fetch_and_add(&vm->packets, 1);
	__sync_fetch_and_add(&vm->bytes, skb->len);
	skb->mark = vm->classid;
	return 0;
}

SEC("tc")
int host_port_out(struct __sk_buff *skb)
{
	if (skb->mark >> 16 == HOST_HTB_MAJOR && (skb->mark & 0xffff))
		skb->priority = skb->mark;
	return 0;
}
