/* compressed.c: gzip (zlib) and xz (liblzma) behind one streaming step. */
#include "source/compressed.h"

#include <limits.h>
#include <lzma.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/units.h"

enum { XZ_MEMLIMIT = 256u << 20 };

typedef struct {
	sr_codec codec;
	z_stream z;
	lzma_stream x;
	const char *why; /* the codec's words when a step fails */
} decoder;

/* What a step did: more to do, the end of the data, no progress possible with the input left
 * (cut short), or corrupt data. */
enum { STEP_MORE, STEP_END, STEP_SHORT, STEP_BAD };

static int decoder_init(decoder *d, sr_codec codec)
{
	memset(d, 0, sizeof *d);
	d->codec = codec;
	if (codec == SR_GZIP)
		return inflateInit2(&d->z, 15 + 16) == Z_OK ? 0 : -1; /* gzip wrapper only */
	lzma_stream init = LZMA_STREAM_INIT;
	d->x = init;
	return lzma_stream_decoder(&d->x, XZ_MEMLIMIT, LZMA_CONCATENATED) == LZMA_OK ? 0 : -1;
}

static void decoder_end(decoder *d)
{
	if (d->codec == SR_GZIP)
		inflateEnd(&d->z);
	else
		lzma_end(&d->x);
}

/* Whether the bytes after a gzip member are only zeros (padding that gzip -d accepts too). */
static int only_zeros(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static int gzip_step(decoder *d, const uint8_t **in, size_t *in_left, uint8_t **out,
                     size_t *out_left)
{
	d->z.next_in = (Bytef *)(uintptr_t)*in;
	d->z.avail_in = (uInt)MR_MIN(*in_left, (size_t)UINT_MAX);
	d->z.next_out = *out;
	d->z.avail_out = (uInt)MR_MIN(*out_left, (size_t)UINT_MAX);
	uInt in_before = d->z.avail_in, out_before = d->z.avail_out;
	int r = inflate(&d->z, Z_NO_FLUSH);
	*in += in_before - d->z.avail_in;
	*in_left -= in_before - d->z.avail_in;
	*out += out_before - d->z.avail_out;
	*out_left -= out_before - d->z.avail_out;
	if (r == Z_STREAM_END) {
		if (*in_left >= 2 && (*in)[0] == 0x1f && (*in)[1] == 0x8b) /* the next member */
			return inflateReset(&d->z) == Z_OK ? STEP_MORE : STEP_BAD;
		if (only_zeros(*in, *in_left))
			return STEP_END;
		d->why = "trailing bytes after the gzip data";
		return STEP_BAD;
	}
	if (r == Z_OK)
		return STEP_MORE;
	if (r == Z_BUF_ERROR)
		return STEP_SHORT;
	d->why = d->z.msg ? d->z.msg : "invalid data";
	return STEP_BAD;
}

static int xz_step(decoder *d, const uint8_t **in, size_t *in_left, uint8_t **out, size_t *out_left)
{
	d->x.next_in = *in;
	d->x.avail_in = *in_left;
	d->x.next_out = *out;
	d->x.avail_out = *out_left;
	lzma_ret r = lzma_code(&d->x, *in_left ? LZMA_RUN : LZMA_FINISH);
	*in = d->x.next_in;
	*in_left = d->x.avail_in;
	*out = d->x.next_out;
	*out_left = d->x.avail_out;
	switch (r) {
	case LZMA_OK: return STEP_MORE;
	case LZMA_STREAM_END: return STEP_END;
	case LZMA_BUF_ERROR: return STEP_SHORT;
	case LZMA_MEMLIMIT_ERROR:
		d->why = "its decoder needs more than 256 MiB of memory";
		return STEP_BAD;
	case LZMA_FORMAT_ERROR: d->why = "not an xz stream"; return STEP_BAD;
	case LZMA_OPTIONS_ERROR: d->why = "unsupported options"; return STEP_BAD;
	case LZMA_DATA_ERROR: d->why = "corrupt data"; return STEP_BAD;
	default: d->why = "cannot be decoded"; return STEP_BAD;
	}
}

static int decoder_step(decoder *d, const uint8_t **in, size_t *in_left, uint8_t **out,
                        size_t *out_left)
{
	return d->codec == SR_GZIP ? gzip_step(d, in, in_left, out, out_left)
	                           : xz_step(d, in, in_left, out, out_left);
}

static const char *codec_name(sr_codec c)
{
	return c == SR_GZIP ? "gzip" : "xz";
}

/* Whether `made` bytes out of `len` compressed ones break a limit; the reason into err. */
static mr_status check_limits(sr_codec codec, uint64_t made, size_t len, const sr_limits *lim,
                              mr_error *err)
{
	if (made > lim->max_member_bytes)
		return mr_fail(err, MR_EINPUT,
		               "%s data inflates to more than %llu bytes, over the limit",
		               codec_name(codec), (unsigned long long)lim->max_member_bytes);
	if (made > MR_MIB && made / (len ? len : 1) > lim->max_ratio)
		return mr_fail(err, MR_EINPUT,
		               "%s data inflates more than %llu times (%zu bytes to over %llu): "
		               "refused as a compression bomb",
		               codec_name(codec), (unsigned long long)lim->max_ratio, len,
		               (unsigned long long)made);
	return MR_OK;
}

mr_status sr_inflate(sr_codec codec, const uint8_t *data, size_t len, const sr_limits *lim,
                     in_data *out, mr_error *err)
{
	decoder d;
	if (decoder_init(&d, codec))
		return mr_oom(err);
	uint64_t cap_limit = lim->max_member_bytes + 1; /* one more byte tells it went over */
	size_t cap = (size_t)MR_MIN((uint64_t)MR_MAX(len, 4096) * 4, cap_limit), made = 0;
	uint8_t *buf = malloc(cap);
	mr_status st = buf ? MR_OK : mr_oom(err);
	const uint8_t *in = data;
	size_t in_left = len;
	int r = STEP_MORE;
	while (!st && r == STEP_MORE) {
		if (made == cap) {
			size_t grown = (size_t)MR_MIN((uint64_t)cap * 2, cap_limit);
			uint8_t *nb = grown > cap ? realloc(buf, grown) : NULL;
			if (!nb) {
				st = grown > cap ? mr_oom(err)
				                 : check_limits(codec, made, len, lim, err);
				break;
			}
			buf = nb;
			cap = grown;
		}
		uint8_t *o = buf + made;
		size_t o_left = cap - made;
		r = decoder_step(&d, &in, &in_left, &o, &o_left);
		made = cap - o_left;
		st = check_limits(codec, made, len, lim, err);
	}
	if (!st && r == STEP_SHORT)
		st = mr_fail(err, MR_EINPUT, "%s data is cut short (after %zu bytes out)",
		             codec_name(codec), made);
	else if (!st && r == STEP_BAD)
		st = mr_fail(err, MR_EINPUT, "%s data: %s", codec_name(codec), d.why);
	decoder_end(&d);
	if (st) {
		free(buf);
		return st;
	}
	in_adopt(out, buf, made);
	return MR_OK;
}

int64_t sr_inflate_head(sr_codec codec, const uint8_t *data, size_t len, uint8_t *buf, size_t n)
{
	decoder d;
	if (decoder_init(&d, codec))
		return -1;
	const uint8_t *in = data;
	size_t in_left = len, out_left = n;
	uint8_t *o = buf;
	int r = STEP_MORE;
	while (r == STEP_MORE && out_left)
		r = decoder_step(&d, &in, &in_left, &o, &out_left);
	decoder_end(&d);
	size_t made = n - out_left;
	return r == STEP_BAD && made == 0 ? -1 : (int64_t)made;
}
