/* sniff.h: the one answer to "what kind of input is this", from its first bytes, never from its
 * file name. The loader decides by it how to read an input; batch discovery which files of a
 * folder or archive may be evidence; `diff` whether a path is an archive; both whether an input
 * is compressed.
 *
 * Ownership: reads the bytes it is given; nothing is allocated. */
#ifndef MR_SNIFF_H
#define MR_SNIFF_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
	DC_PICKLE, /* the PROTO opcode 0x80 and a protocol from 2 to 5 */
	DC_ZIP,    /* "PK\3\4", or an empty archive's "PK\5\6" */
	DC_GZIP,   /* 1f 8b: gzip; what it holds is sniffed once inflated (source/compressed.h) */
	DC_XZ,     /* fd "7zXZ" 00: xz, likewise */
	DC_BINARY, /* a NUL byte in the first DC_SNIFF_BYTES: neither a pickle nor text */
	DC_JSON,   /* '{' first (after a UTF-8 byte order mark and blanks) */
	DC_TEXT,   /* anything else: a log, a memory_summary() table, an OOM message, or not */
} dc_kind;

/* How many bytes dc_sniff looks at; give it at least that many when there are. */
enum { DC_SNIFF_BYTES = 4096 };

dc_kind dc_sniff(const uint8_t *data, size_t len);

#endif
