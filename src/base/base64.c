/* base64.c: RFC 4648 base64. */
#include "base/base64.h"

#include "base/buf.h"

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void b64_encode(mr_buf *out, const unsigned char *data, size_t len)
{
	char chunk[256];
	size_t used = 0;
	for (size_t i = 0; i < len; i += 3) {
		unsigned v = (unsigned)data[i] << 16;
		size_t rest = len - i;
		if (rest > 1)
			v |= (unsigned)data[i + 1] << 8;
		if (rest > 2)
			v |= data[i + 2];
		chunk[used++] = b64_alphabet[(v >> 18) & 63];
		chunk[used++] = b64_alphabet[(v >> 12) & 63];
		chunk[used++] = rest > 1 ? b64_alphabet[(v >> 6) & 63] : '=';
		chunk[used++] = rest > 2 ? b64_alphabet[v & 63] : '=';
		if (used + 4 > sizeof chunk) {
			mr_buf_append(out, chunk, used);
			used = 0;
		}
	}
	mr_buf_append(out, chunk, used);
}

static int b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int b64_decode(mr_buf *out, const char *text, size_t len)
{
	if (len % 4)
		return -1;
	for (size_t i = 0; i < len; i += 4) {
		int v[4];
		int pad = 0;
		for (int k = 0; k < 4; k++) {
			char c = text[i + (size_t)k];
			if (c == '=' && i + 4 == len && k >= 2) {
				v[k] = 0;
				pad++;
			} else if (pad || (v[k] = b64_value(c)) < 0) {
				return -1;
			}
		}
		unsigned w = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 |
		             (unsigned)v[3];
		unsigned char bytes[3] = {(unsigned char)(w >> 16), (unsigned char)(w >> 8),
		                          (unsigned char)w};
		mr_buf_append(out, bytes, (size_t)(3 - pad));
	}
	return out->failed ? -1 : 0;
}
