// SPDX-License-Identifier: GPL-2.0
/* A map declared LIBBPF_PIN_BY_NAME: BpfObject.open(..., pin_root=DIR) pins it as DIR/hits
 * on first load and reuses it on later loads. Always open this object with a pin_root. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} hits SEC(".maps");

SEC("xdp")
int xdp_hits(struct xdp_md *ctx)
{
	__u32 key = 0;
	__u64 *n = bpf_map_lookup_elem(&hits, &key);

	if (n)
		*n += 1;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
