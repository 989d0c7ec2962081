/* Micro-bench: zlib crc32 vs ISA-L crc32_gzip_refl on MRC-sized packets (the ICRC choice of
 * native/, docs/endpoint.md). Prints ns per 2 KiB packet for each and their ratio.
 * Build and run: gcc -O2 bench/crc_micro.c -lz -lisal -o /tmp/crc_micro && /tmp/crc_micro */
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include <zlib.h>
#include <isa-l/crc.h>

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void)
{
	static uint8_t buf[2048 + 60];
	const int rounds = 200000;
	volatile uint32_t sink = 0;
	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	if (crc32(0, buf, sizeof(buf)) != crc32_gzip_refl(0, buf, sizeof(buf))) {
		fprintf(stderr, "zlib and ISA-L disagree\n");
		return 1;
	}
	double t0 = now_s();
	for (int i = 0; i < rounds; i++)
		sink += crc32(i, buf, sizeof(buf));
	double t1 = now_s();
	for (int i = 0; i < rounds; i++)
		sink += crc32_gzip_refl(i, buf, sizeof(buf));
	double t2 = now_s();
	double z = (t1 - t0) / rounds * 1e9, s = (t2 - t1) / rounds * 1e9;
	printf("zlib %.0f ns/packet, isa-l %.0f ns/packet, isa-l is %.1fx faster\n", z, s, z / s);
	return 0;
}
