// SPDX-License-Identifier: GPL-2.0
/*
 * User-space harness for bpf/paccp_law.h (the same header the BPF program uses).
 *
 * Reads lines on stdin, all values integers (Q20 fixed point where noted), and prints one result line
 * per input line:
 *   L <ss 0|1> <cwnd_q20> <wmin_q20> <omega_q20> <rcos_q20> <loss 0|1>
 *       -> "<per_rtt_q20> <acks> <per_ack_q20>"   (for a loss both results are the decreased window)
 *   W <theta_bps> <srtt_ns> <mss>  -> "<wmin_q20>"
 *   P <omega_q20>                  -> "<3^(1-omega) q20>"
 * tests/datapath/test_law_vectors.py converts tests/vectors/paccp_law.json to this format and compares.
 */
#include <stdio.h>
#include <stdint.h>
#include "paccp_law.h"

int main(void)
{
	char kind;
	while (scanf(" %c", &kind) == 1) {
		if (kind == 'L') {
			unsigned long long ss, w, wmin, omega, rcos, loss;
			if (scanf("%llu %llu %llu %llu %llu %llu", &ss, &w, &wmin, &omega, &rcos, &loss) != 6)
				return 1;
			__u64 p3 = paccp_pow3_1m(omega);
			if (loss) {
				__u64 r = paccp_loss(w, (int)ss, omega, p3, PACCP_ONE);
				printf("%llu 0 %llu\n", (unsigned long long)r, (unsigned long long)r);
				continue;
			}
			__u64 rtt = paccp_rtt_ack(w, (int)ss, wmin, omega, rcos, p3, PACCP_ONE);
			__u64 acks = w >> PACCP_SHIFT;
			if (acks < 1)
				acks = 1;
			__u64 a = w;
			for (__u64 i = 0; i < acks; i++)
				a = paccp_ack_one(a, (int)ss, wmin, omega, rcos, p3, PACCP_ONE);
			printf("%llu %llu %llu\n", (unsigned long long)rtt, (unsigned long long)acks,
			       (unsigned long long)a);
		} else if (kind == 'W') {
			unsigned long long theta, srtt, mss;
			if (scanf("%llu %llu %llu", &theta, &srtt, &mss) != 3)
				return 1;
			printf("%llu\n", (unsigned long long)paccp_wmin(theta, srtt, mss));
		} else if (kind == 'P') {
			unsigned long long omega;
			if (scanf("%llu", &omega) != 1)
				return 1;
			printf("%llu\n", (unsigned long long)paccp_pow3_1m(omega));
		} else {
			return 1;
		}
	}
	return 0;
}
