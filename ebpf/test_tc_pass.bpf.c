// SPDX-License-Identifier: GPL-2.0
/* The smallest tc classifier: lets every packet through. `mrc doctor` attaches it to a
 * clsact qdisc to prove tc BPF works here. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int tc_pass(struct __sk_buff *skb)
{
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
