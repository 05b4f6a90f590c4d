/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harnesses (tests/fuzz/fuzz_*.c). Each defines
 * LLVMFuzzerTestOneInput(); built with clang -DRDMX_FUZZ=ON it links
 * libFuzzer, otherwise replay.c's main() runs it over the committed corpus
 * (a unit test). A broken invariant aborts: ASan/UBSan or libFuzzer then
 * report it with the input that did it.
 */
#ifndef RDMX_TESTS_FUZZ_H
#define RDMX_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Abort with @what when @cond is false (in every build, NDEBUG or not). */
#define FZ_CHECK(cond, what)                                                 \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "%s:%d: invariant broken: %s\n",     \
				__FILE__, __LINE__, (what));                 \
			abort();                                             \
		}                                                            \
	} while (0)

/* Consume bytes of a fuzz input in order; reads past the end give 0. */
struct fz_in {
	const uint8_t *p;
	size_t n;
};

static inline uint64_t fz_take(struct fz_in *in, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++) {
		uint8_t b = in->n ? *in->p : 0;

		if (in->n) {
			in->p++;
			in->n--;
		}
		v |= (uint64_t)b << (8 * i);
	}
	return v;
}

#endif /* RDMX_TESTS_FUZZ_H */
