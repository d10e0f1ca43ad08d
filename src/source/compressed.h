/* compressed.h: gzip and xz inputs, inflated within the limits of zip members (limits.h).
 *
 * `memreport train.log.gz`, a run folder holding `snapshot.pickle.xz`, a zip member that is a
 * gzip file: the caller knows from the content which codec it is (decode/sniff.h says DC_GZIP
 * or DC_XZ from the magic bytes, never from the name), and this inflates it. Concatenated gzip
 * members and xz streams are read as one, as gzip -d and xz -d do. Like a zip member, the output
 * may not pass lim->max_member_bytes, nor, above 1 MiB, lim->max_ratio times the compressed
 * size (a compression bomb); xz's decoder may not take more than 256 MiB of memory (xz -9 needs
 * 65 MiB).
 *
 * Ownership: sr_inflate fills an in_data (source/input.h) that in_release frees; the input
 * bytes are only read. Nothing here prints. */
#ifndef MR_COMPRESSED_H
#define MR_COMPRESSED_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "source/input.h"
#include "source/limits.h"

typedef enum { SR_GZIP, SR_XZ } sr_codec;

/* The whole of data[0..len) inflated. MR_EINPUT with the reason when it is corrupt, cut short,
 * or over a limit; MR_EFAIL when memory runs out. */
mr_status sr_inflate(sr_codec codec, const uint8_t *data, size_t len, const sr_limits *lim,
                     in_data *out, mr_error *err);

/* Up to n bytes from the start of what data[0..len) (the start of a compressed file) inflates
 * to, for sniffing: the count, or -1 when not even that much can be read. */
int64_t sr_inflate_head(sr_codec codec, const uint8_t *data, size_t len, uint8_t *buf, size_t n);

#endif
