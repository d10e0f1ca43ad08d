/* input.h: bytes of one input (a file, standard input), mapped or read.
 *
 * Ownership: in_read fills an in_data that in_release frees (unmaps). Regular files are
 * mapped read-only; pipes and standard input are read into memory. */
#ifndef MR_INPUT_H
#define MR_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct {
	const uint8_t *data;
	size_t len;
	void *map; /* mmap base, or NULL */
	size_t map_len;
	uint8_t *heap; /* malloc'd copy, or NULL */
} in_data;

/* Reads `path` ("-" is standard input). Errors name no path: the caller adds it. */
mr_status in_read(const char *path, in_data *out, mr_error *err);
/* Takes ownership of a malloc'd buffer (e.g. a decompressed zip member). */
void in_adopt(in_data *out, uint8_t *heap, size_t len);
/* Tells the kernel the mapped bytes before `upto` will not be read again. */
void in_drop_before(in_data *in, size_t upto);
void in_release(in_data *in);

#endif
