/* SPDX-License-Identifier: Apache-2.0 */
/* ICRC of the mrckit profile (design 3.1), incremental like controller/mrckit/endpoint/icrc.py:
 * the CRC runs over MRC_ICRC_PREFIX_LEN bytes of ones, a pseudo inner IPv6 + UDP header built
 * from the addresses and length with the variant fields set to ones, the BTH with its reserved
 * byte set to ones, and the rest of the packet. CRC-32 by ISA-L's PCLMUL kernel, which a
 * micro-bench (bench/crc_micro.c) measured ~10x faster than zlib's on 2 KiB packets; it is
 * zlib-compatible, chaining included. */
#include <string.h>
#include <arpa/inet.h>
#include <isa-l/crc.h>

#include "mrcep.h"

uint32_t mrcep_crc32(uint32_t crc, const uint8_t *buf, uint64_t len)
{
	return crc32_gzip_refl(crc, buf, len);
}

const char *mrcep_crc_impl(void)
{
	return "isa-l crc32_gzip_refl";
}

static uint32_t prefix_crc(const uint8_t src[16], const uint8_t dst[16], uint32_t udp_payload_len)
{
	struct {
		uint8_t ones[MRC_ICRC_PREFIX_LEN];
		struct ipv6hdr ip6;
		struct udphdr udp;
	} __attribute__((packed)) h;
	uint16_t udp_len = htons((uint16_t)(MRC_UDP_LEN + udp_payload_len));

	memset(&h, 0xff, sizeof(h));
	h.ip6.version = 6;  /* traffic class and flow label stay ones */
	h.ip6.payload_len = udp_len;
	h.ip6.nexthdr = MRC_IPPROTO_UDP;
	memcpy(&h.ip6.saddr, src, 16);
	memcpy(&h.ip6.daddr, dst, 16);
	h.udp.dest = htons(MRC_UDP_PORT_ROCEV2);  /* source port (the EV) and checksum stay ones */
	h.udp.len = udp_len;
	return mrcep_crc32(0, (const uint8_t *)&h, sizeof(h));
}

uint32_t mrcep_icrc(const uint8_t src[16], const uint8_t dst[16], uint32_t total,
		    const uint8_t *const *parts, const uint32_t *lens, int n)
{
	const size_t resv = offsetof(struct mrc_bth, resv8);
	uint8_t ones = 0xff;
	uint32_t crc = prefix_crc(src, dst, total);

	crc = mrcep_crc32(crc, parts[0], resv);
	crc = mrcep_crc32(crc, &ones, 1);
	crc = mrcep_crc32(crc, parts[0] + resv + 1, lens[0] - resv - 1);
	for (int i = 1; i < n; i++)
		crc = mrcep_crc32(crc, parts[i], lens[i]);
	return crc;
}

int mrcep_icrc_ok(const uint8_t src[16], const uint8_t dst[16], const uint8_t *buf, uint32_t n)
{
	const uint8_t *parts[1] = {buf};
	uint32_t lens[1] = {n - MRC_ICRC_LEN}, got;

	if (n < MRC_BTH_LEN + MRC_ICRC_LEN)
		return 0;
	got = (uint32_t)buf[n - 4] | (uint32_t)buf[n - 3] << 8 | (uint32_t)buf[n - 2] << 16 |
	      (uint32_t)buf[n - 1] << 24;
	return mrcep_icrc(src, dst, n, parts, lens, 1) == got;
}
