/* sniff.c: the kind of an input from its first bytes. */
#include "decode/sniff.h"

#include <string.h>

dc_kind dc_sniff(const uint8_t *data, size_t len)
{
	if (len >= 2 && data[0] == 0x80 && data[1] >= 2 && data[1] <= 5)
		return DC_PICKLE;
	if (len >= 4 && data[0] == 'P' && data[1] == 'K' &&
	    ((data[2] == 3 && data[3] == 4) || (data[2] == 5 && data[3] == 6)))
		return DC_ZIP;
	if (len >= 2 && data[0] == 0x1f && data[1] == 0x8b)
		return DC_GZIP;
	if (len >= 6 && memcmp(data,
	                       "\xfd"
	                       "7zXZ\0",
	                       6) == 0)
		return DC_XZ;
	size_t n = len < DC_SNIFF_BYTES ? len : DC_SNIFF_BYTES;
	if (memchr(data, 0, n))
		return DC_BINARY;
	size_t i = 0;
	if (n >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF)
		i = 3; /* UTF-8 byte order mark */
	while (i < n && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n'))
		i++;
	return i < n && data[i] == '{' ? DC_JSON : DC_TEXT;
}
