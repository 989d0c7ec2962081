/* SPDX-License-Identifier: Apache-2.0 */
/* The NSCC-style window of controller/mrckit/endpoint/cc.py, operation for operation: the
 * same double arithmetic in the same order, so both endpoints grow and shrink alike
 * (the golden tests compare their packets). Built with -ffp-contract=off for that reason. */
#include "mrcep.h"

static void clamp(struct mrc_cc *cc)
{
	double lo = (double)cc->cfg.mtu, hi = (double)cc->cfg.max_cwnd;
	if (cc->cwnd < lo)
		cc->cwnd = lo;
	if (cc->cwnd > hi)
		cc->cwnd = hi;
}

void mrc_cc_init(struct mrc_cc *cc, const struct mrc_cc_cfg *cfg)
{
	cc->cfg = *cfg;
	cc->cwnd = (double)(cfg->initial_cwnd < cfg->max_cwnd ? cfg->initial_cwnd : cfg->max_cwnd);
	cc->base_rtt = 0;
	cc->last_md = -((int64_t)1 << 62);
	cc->decreases = 0;
}

static void decrease(struct mrc_cc *cc, double frac, int64_t now)
{
	if (now - cc->last_md < cc->base_rtt + cc->cfg.target_qdelay_ns)
		return;
	cc->last_md = now;
	cc->cwnd *= 1 - frac;
	cc->decreases++;
	clamp(cc);
}

void mrc_cc_on_ack(struct mrc_cc *cc, int64_t acked, int64_t rtt, int ecn, int64_t now)
{
	int64_t target;
	if (rtt > 0 && (cc->base_rtt == 0 || rtt < cc->base_rtt))
		cc->base_rtt = rtt;
	target = cc->base_rtt + cc->cfg.target_qdelay_ns;
	if (!ecn) {
		if (acked <= 0)
			return;
		if (rtt < target)
			cc->cwnd += (double)acked * cc->cfg.eta * (double)(target - rtt) / (double)target;
		else
			cc->cwnd += cc->cfg.fi * (double)cc->cfg.mtu * (double)acked / cc->cwnd;
	} else if (rtt >= target) {
		double f = cc->cfg.gamma * (double)(rtt - target) / (double)(rtt > 1 ? rtt : 1);
		decrease(cc, f < cc->cfg.max_md ? f : cc->cfg.max_md, now);
	}
	clamp(cc);
}

void mrc_cc_on_trim(struct mrc_cc *cc, int64_t now)
{
	decrease(cc, cc->cfg.max_md, now);
}

void mrc_cc_on_timeout(struct mrc_cc *cc)
{
	cc->cwnd /= 2;
	cc->decreases++;
	clamp(cc);
}
