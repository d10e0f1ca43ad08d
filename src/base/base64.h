/* base64.h: RFC 4648 base64, for embedding images in data: URIs.
 *
 * Ownership: appends to a caller-owned mr_buf; allocates nothing else. */
#ifndef MR_BASE64_H
#define MR_BASE64_H

#include <stddef.h>

#include "base/buf.h"

/* Appends the padded base64 encoding of data[0..len) to out (no line breaks). */
void b64_encode(mr_buf *out, const unsigned char *data, size_t len);

/* Decodes padded base64 into out (for tests and checks). Returns 0, or -1 on a character
 * outside the alphabet or a bad length. */
int b64_decode(mr_buf *out, const char *text, size_t len);

#endif
