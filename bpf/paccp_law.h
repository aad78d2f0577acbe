/* SPDX-License-Identifier: GPL-2.0 */
/*
 * PACCP control law (SPEC section 3, paper Eqs. 14-18) in fixed-point integer arithmetic.
 *
 * Usable from BPF (clang -target bpf) and from user-space C (bpf/test_law.c). No floating point, no
 * signed division, every division guarded.
 *
 * Representation: windows, omega, rcos and factors are unsigned Q20 fixed point (PACCP_ONE = 2^20).
 * The window is kept as a Q20 value: the kernel's integer snd_cwnd is its integer part, the CA state keeps
 * the fractional remainder.
 *
 * 3^(1-omega) = 2^((1-omega) * log2 3) is computed with an exact split into integer and fractional parts,
 * a 16-entry table of 2^(j/16) (Q30) and a cubic Taylor polynomial on the remaining [0, 1/16) interval.
 * Approximation error of 2^f: < 2e-7 relative (Taylor remainder (ln2/16)^4/24 = 1.5e-7) plus Q20 rounding
 * (2^-20 absolute ~ 1e-6 of one unit). Against the double-precision oracle the whole law stays within
 * 1e-6 relative per rule application; the harness tolerance is 1e-3 relative + 1e-3 segments absolute,
 * which also absorbs the per-ACK accumulation of Q20 rounding over up to 400 ACKs.
 *
 * Preconditions (documented, enforced by the loaders): rcos >= 1, omega > 0. Results that would be
 * negative saturate at 0 and are then floored at the minimum window.
 */
#ifndef PACCP_LAW_H
#define PACCP_LAW_H

#ifndef __BPF__
/* same definitions as <linux/types.h>, so including both is harmless; BPF gets them from vmlinux.h */
typedef unsigned long long __u64;
typedef unsigned int __u32;
#endif

#define PACCP_SHIFT 20
#define PACCP_ONE (1ULL << PACCP_SHIFT)
/* log2(3) in Q20 (1.584962500721156 * 2^20) */
#define PACCP_LOG2_3_Q20 1661954ULL
/* ln(2) in Q30 */
#define PACCP_LN2_Q30 744261118ULL
#define PACCP_Q30 (1ULL << 30)
/* default rcos = 3 (SPEC section 2) */
#define PACCP_RCOS_DEFAULT (3ULL * PACCP_ONE)

/* 2^(j/16) in Q30, j = 0..15 */
static const __u64 paccp_exp2_tab[16] = {
	1073741824ULL, 1121280436ULL, 1170923762ULL, 1222764986ULL, 1276901417ULL, 1333434672ULL,
	1392470869ULL, 1454120821ULL, 1518500250ULL, 1585730000ULL, 1655936265ULL, 1729250827ULL,
	1805811301ULL, 1885761398ULL, 1969251188ULL, 2056437387ULL,
};

/* 2^f for f in Q20, 0 <= f < 1; result in Q30. */
static __attribute__((always_inline)) inline __u64 paccp_exp2_frac_q30(__u64 f)
{
	__u64 j = (f >> 16) & 15;          /* top 4 fractional bits */
	__u64 r = f & 0xFFFF;              /* remainder in Q20, < 1/16 */
	__u64 x = (r << 10) * PACCP_LN2_Q30 >> 30; /* r * ln2 in Q30 */
	/* 1 + x + x^2/2 + x^3/6 (Q30) */
	__u64 x2 = (x * x) >> 30;
	__u64 x3 = (x2 * x) >> 30;
	__u64 p = PACCP_Q30 + x + (x2 >> 1) + x3 / 6;
	return (paccp_exp2_tab[j] * p) >> 30;
}

/* 3^(1-omega) in Q20 for omega in Q20 (omega >= 0). */
static __attribute__((always_inline)) inline __u64 paccp_pow3_1m(__u64 omega)
{
	__u64 e, k, f, v;

	if (omega <= PACCP_ONE) {
		/* exponent (1-omega)*log2 3 in [0, 1.585) */
		e = ((PACCP_ONE - omega) * PACCP_LOG2_3_Q20) >> PACCP_SHIFT;
		k = e >> PACCP_SHIFT;
		f = e & (PACCP_ONE - 1);
		v = paccp_exp2_frac_q30(f) << k; /* k is 0 or 1 */
		return (v + (1ULL << 9)) >> 10;
	}
	/* exponent -(omega-1)*log2 3 = -(k + f) = -(k+1) + (1-f) */
	e = ((omega - PACCP_ONE) * PACCP_LOG2_3_Q20) >> PACCP_SHIFT;
	k = e >> PACCP_SHIFT;
	f = e & (PACCP_ONE - 1);
	if (k >= 40)
		return 0;
	if (f == 0) {
		v = PACCP_Q30 >> k;
	} else {
		v = paccp_exp2_frac_q30(PACCP_ONE - f) >> (k + 1);
	}
	return (v + (1ULL << 9)) >> 10;
}

/* Q20 a * Q20 w -> Q20 without overflow for w < 2^40 (a million segments); coarser above. */
static __attribute__((always_inline)) inline __u64 paccp_mul_q20(__u64 a, __u64 w)
{
	if (w < (1ULL << 40) && a < (1ULL << 24))
		return (a * w) >> PACCP_SHIFT;
	return a * (w >> PACCP_SHIFT);
}

static __attribute__((always_inline)) inline __u64 paccp_sat_sub(__u64 a, __u64 b)
{
	return a > b ? a - b : 0;
}

static __attribute__((always_inline)) inline __u64 paccp_floor(__u64 w, __u64 min_w)
{
	return w < min_w ? min_w : w;
}

/* Per-RTT multiplicative slow-start factor minus one, (g - 1), in Q20. */
static __attribute__((always_inline)) inline __u64 paccp_ss_gain_m1(int below, __u64 p3, __u64 rcos)
{
	if (below)
		return paccp_sat_sub(3 * rcos, p3) >> 1;
	return paccp_sat_sub(3 * PACCP_ONE, p3) >> 1;
}

/* Q20 a / Q20 w -> Q20, guarded. */
static __attribute__((always_inline)) inline __u64 paccp_div_q20(__u64 a, __u64 w)
{
	if (w == 0)
		return 0;
	return (a << PACCP_SHIFT) / w;
}

/*
 * One acknowledged segment: the per-ACK translation of the per-RTT rule (regime re-evaluated by the
 * caller's cwnd < wmin test each call). w, wmin, omega, rcos, p3 = 3^(1-omega) in Q20; ss = slow start.
 */
static __attribute__((always_inline)) inline __u64
paccp_ack_one(__u64 w, int ss, __u64 wmin, __u64 omega, __u64 rcos, __u64 p3, __u64 min_w)
{
	int below = w < wmin;

	if (ss) {
		w += paccp_ss_gain_m1(below, p3, rcos);
	} else if (below) {
		/* ((rcos+1)/2 - 1) + (rcos - 1 + omega) / w */
		w += (paccp_sat_sub(rcos, PACCP_ONE) >> 1) +
		     paccp_div_q20(paccp_sat_sub(rcos + omega, PACCP_ONE), w);
	} else {
		w += paccp_div_q20(omega, w);
	}
	return paccp_floor(w, min_w);
}

/* The decrease rule on a loss event; the new ssthresh equals the result. */
static __attribute__((always_inline)) inline __u64 paccp_loss(__u64 w, int ss, __u64 omega, __u64 p3,
							      __u64 min_w)
{
	__u64 r;

	if (ss) {
		/* (1 - 3^(1-omega)/2) * w */
		__u64 fac = paccp_sat_sub(PACCP_ONE, p3 >> 1);
		r = paccp_mul_q20(fac, w);
	} else {
		/* w/2 + (omega - 1) */
		r = paccp_sat_sub((w >> 1) + omega, PACCP_ONE);
	}
	return paccp_floor(r, min_w);
}

/* The per-RTT rule applied once (no loss); used by the harness as a reference of the equations. */
static __attribute__((always_inline)) inline __u64
paccp_rtt_ack(__u64 w, int ss, __u64 wmin, __u64 omega, __u64 rcos, __u64 p3, __u64 min_w)
{
	int below = w < wmin;
	__u64 r;

	if (ss) {
		r = w + paccp_mul_q20(paccp_ss_gain_m1(below, p3, rcos), w);
	} else if (below) {
		r = paccp_mul_q20((rcos + PACCP_ONE) >> 1, w);
		r += paccp_sat_sub(rcos + omega, PACCP_ONE);
	} else {
		r = w + omega;
	}
	return paccp_floor(r, min_w);
}

/*
 * Wmin = theta * srtt / MSS in Q20 segments. theta in bit/s, srtt in ns, mss in bytes.
 * Computed as (theta * srtt_ns / 1000) / (8 * mss * 1e6) with a quotient/remainder split so the Q20
 * shift never overflows; theta is capped at 1.8 Tbit/s and srtt at 4.29 s.
 */
static __attribute__((always_inline)) inline __u64 paccp_wmin(__u64 theta_bps, __u64 srtt_ns, __u64 mss)
{
	__u64 num, den, q, r;

	if (theta_bps == 0 || srtt_ns == 0 || mss == 0)
		return 0;
	if (srtt_ns > 0xFFFFFFFFULL)
		srtt_ns = 0xFFFFFFFFULL;
	if (theta_bps > 1800000000000ULL)
		theta_bps = 1800000000000ULL;
	if (theta_bps <= 0xFFFFFFFFULL) /* both < 2^32: the product cannot overflow */
		num = theta_bps * srtt_ns / 1000;
	else
		num = (theta_bps / 1000) * srtt_ns;
	den = 8ULL * mss * 1000000ULL;
	q = num / den;
	r = num - q * den;
	return (q << PACCP_SHIFT) + (r << PACCP_SHIFT) / den;
}

#endif /* PACCP_LAW_H */
