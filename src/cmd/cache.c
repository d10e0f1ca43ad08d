/* cache.c: content hash, entry files, msgpack payloads. */
#include "cmd/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/output.h"
#include "source/input.h"

/* The binary's own bytes: any rebuild (a renderer fixed, a rule added) changes every key, so
 * an entry written by another build is never mistaken for this build's answer. */
static h128_digest build_id;
static pthread_once_t build_id_once = PTHREAD_ONCE_INIT;

static void compute_build_id(void)
{
	h128_state h;
	h128_init(&h, 0x6d656d7265706f72ull);
	in_data exe;
	mr_error err = {0};
	if (in_read("/proc/self/exe", &exe, &err) == MR_OK) {
		h128_update(&h, exe.data, exe.len);
		in_release(&exe);
	} else {
		h128_str(&h, "memreport build of unknown bytes");
	}
	h128_final(&h, &build_id);
}

void ca_key_begin(h128_state *h)
{
	pthread_once(&build_id_once, compute_build_id);
	h128_init(h, 0);
	h128_str(h, "memreport-cache");
	h128_u64(h, CA_VERSION);
	h128_update(h, build_id.bytes, sizeof build_id.bytes);
}

/* ---- entries ------------------------------------------------------------------------------ */

static const char magic[8] = {'M', 'R', 'C', 'A', 'C', 'H', 'E', '1'};
enum { HEADER_LEN = 8 + 4 + 16 + 8 + 16 };

void ca_entry_free(ca_entry *e)
{
	ix_row_free(&e->row);
	free(e->json);
	free(e->html);
	memset(e, 0, sizeof *e);
}

mr_status ca_prepare_dir(const char *dir, mr_error *err)
{
	struct stat st;
	if (stat(dir, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			return mr_fail(err, MR_EFAIL, "%s: not a folder", dir);
		return MR_OK;
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return mr_fail(err, MR_EFAIL, "cannot create %s: %s", dir, strerror(errno));
	return MR_OK;
}

static int sbuf_write(void *data, const char *buf, size_t len)
{
	mr_buf_append(data, buf, len);
	return ((mr_buf *)data)->failed ? -1 : 0;
}

static void pack_cstr(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

static void pack_key(msgpack_packer *pk, const char *k)
{
	pack_cstr(pk, k);
}

static void pack_opt_str(msgpack_packer *pk, const char *k, const char *v)
{
	pack_key(pk, k);
	if (v)
		pack_cstr(pk, v);
	else
		msgpack_pack_nil(pk);
}

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void payload_hash(const uint8_t *p, size_t len, h128_digest *out)
{
	h128_state h;
	h128_init(&h, 0x7061796c6f6164ull);
	h128_update(&h, p, len);
	h128_final(&h, out);
}

/* The payload's keys, in the order ca_encode writes them; every one must be present. */
enum { PAYLOAD_KEY_COUNT = 14 };
static const char *const payload_keys[PAYLOAD_KEY_COUNT] = {
    "settings",     "has_snapshot", "has_peaks", "peak_reserved", "peak_allocated", "fragmentation",
    "device_count", "oom_cause",    "rec_id",    "rec_title",     "verdict",        "json",
    "html",         "end"};

mr_status ca_encode(const h128_digest *key, const ca_entry *e, mr_buf *out, mr_error *err)
{
	mr_buf payload = {0};
	msgpack_packer pk;
	msgpack_packer_init(&pk, &payload, sbuf_write);
	msgpack_pack_map(&pk, PAYLOAD_KEY_COUNT);
	pack_key(&pk, "settings");
	pack_cstr(&pk, e->row.settings ? e->row.settings : "");
	pack_key(&pk, "has_snapshot");
	e->row.has_snapshot ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
	pack_key(&pk, "has_peaks");
	e->row.has_peaks ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
	pack_key(&pk, "peak_reserved");
	msgpack_pack_uint64(&pk, e->row.peak_reserved);
	pack_key(&pk, "peak_allocated");
	msgpack_pack_uint64(&pk, e->row.peak_allocated);
	pack_key(&pk, "fragmentation");
	msgpack_pack_double(&pk, e->row.fragmentation);
	pack_key(&pk, "device_count");
	msgpack_pack_uint64(&pk, e->row.device_count);
	pack_opt_str(&pk, "oom_cause", e->row.oom_cause);
	pack_opt_str(&pk, "rec_id", e->row.rec_id);
	pack_opt_str(&pk, "rec_title", e->row.rec_title);
	pack_opt_str(&pk, "verdict", e->row.verdict);
	pack_key(&pk, "json");
	msgpack_pack_bin(&pk, e->json_len);
	msgpack_pack_bin_body(&pk, e->json ? e->json : "", e->json_len);
	pack_key(&pk, "html");
	msgpack_pack_bin(&pk, e->html_len);
	msgpack_pack_bin_body(&pk, e->html ? e->html : "", e->html_len);
	pack_key(&pk, "end");
	msgpack_pack_true(&pk);
	if (payload.failed) {
		mr_buf_free(&payload);
		return mr_oom(err);
	}
	uint8_t header[HEADER_LEN];
	memcpy(header, magic, 8);
	put_u32(header + 8, CA_VERSION);
	memcpy(header + 12, key->bytes, 16);
	put_u64(header + 28, payload.len);
	h128_digest ph;
	payload_hash((const uint8_t *)payload.data, payload.len, &ph);
	memcpy(header + 36, ph.bytes, 16);
	mr_buf_append(out, header, sizeof header);
	mr_buf_append(out, payload.data, payload.len);
	mr_buf_free(&payload);
	return out->failed ? mr_oom(err) : MR_OK;
}

/* Walks msgpack bytes without building anything, checking that every declared length and
 * element count fits in what is left. msgpack-c allocates a container's elements from its
 * declared count before reading them, so this runs first: a corrupt count never reaches it.
 * Iterative: a counter of values still to read, no recursion. Returns 0 when exactly one
 * well-formed value fills data[0..len). */
static int msgpack_well_formed(const uint8_t *p, size_t len)
{
	size_t pos = 0;
	uint64_t pending = 1;
	while (pending) {
		if (pos >= len)
			return -1;
		pending--;
		uint8_t t = p[pos++];
		uint64_t skip = 0, items = 0;
		size_t nlen = 0; /* bytes of a length field that follows */
		int is_map = 0, is_container = 0;
		if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3) {
			/* fixint, nil, bool */
		} else if (t >= 0x80 && t <= 0x8f) {
			items = t & 0x0f;
			is_map = is_container = 1;
		} else if (t >= 0x90 && t <= 0x9f) {
			items = t & 0x0f;
			is_container = 1;
		} else if (t >= 0xa0 && t <= 0xbf) {
			skip = t & 0x1f;
		} else {
			switch (t) {
			case 0xc4:
			case 0xd9: nlen = 1; break; /* bin8, str8 */
			case 0xc5:
			case 0xda: nlen = 2; break;
			case 0xc6:
			case 0xdb: nlen = 4; break;
			case 0xcc:
			case 0xd0: skip = 1; break;
			case 0xcd:
			case 0xd1: skip = 2; break;
			case 0xca:
			case 0xce:
			case 0xd2: skip = 4; break;
			case 0xcb:
			case 0xcf:
			case 0xd3: skip = 8; break;
			case 0xdc:
				nlen = 2;
				is_container = 1;
				break;
			case 0xdd:
				nlen = 4;
				is_container = 1;
				break;
			case 0xde:
				nlen = 2;
				is_container = is_map = 1;
				break;
			case 0xdf:
				nlen = 4;
				is_container = is_map = 1;
				break;
			default: return -1; /* ext types and 0xc1: not written by ca_encode */
			}
		}
		if (nlen) {
			if (len - pos < nlen)
				return -1;
			uint64_t n = 0;
			for (size_t i = 0; i < nlen; i++)
				n = n << 8 | p[pos + i];
			pos += nlen;
			if (is_container)
				items = n;
			else
				skip = n;
		}
		if (is_container) {
			if (is_map)
				items *= 2;
			/* every element takes at least one byte */
			if (items > len - pos)
				return -1;
			pending += items;
		}
		if (skip > len - pos)
			return -1;
		pos += (size_t)skip;
	}
	return pos == len ? 0 : -1;
}

static int obj_key_is(const msgpack_object *k, const char *name)
{
	size_t n = strlen(name);
	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
	       memcmp(k->via.str.ptr, name, n) == 0;
}

/* A str (or nil when allow_nil) into a fresh NUL-terminated copy. */
static int take_str(const msgpack_object *v, char **out, int allow_nil)
{
	if (v->type == MSGPACK_OBJECT_NIL && allow_nil) {
		*out = NULL;
		return 0;
	}
	if (v->type != MSGPACK_OBJECT_STR)
		return -1;
	free(*out);
	*out = mr_strndup(v->via.str.ptr, v->via.str.size);
	return *out ? 0 : -1;
}

static int take_bin(const msgpack_object *v, char **out, size_t *len)
{
	if (v->type != MSGPACK_OBJECT_BIN)
		return -1;
	free(*out);
	*out = mr_strndup(v->via.bin.ptr, v->via.bin.size);
	*len = v->via.bin.size;
	return *out ? 0 : -1;
}

static int take_bool(const msgpack_object *v, int *out)
{
	if (v->type != MSGPACK_OBJECT_BOOLEAN)
		return -1;
	*out = v->via.boolean;
	return 0;
}

static int take_u64(const msgpack_object *v, uint64_t *out)
{
	if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return -1;
	*out = v->via.u64;
	return 0;
}

static int decode_payload(const uint8_t *p, size_t len, ca_entry *e)
{
	if (msgpack_well_formed(p, len) != 0)
		return -1;
	msgpack_unpacked up;
	msgpack_unpacked_init(&up);
	size_t off = 0;
	int rc = -1;
	unsigned seen = 0;
	if (msgpack_unpack_next(&up, (const char *)p, len, &off) != MSGPACK_UNPACK_SUCCESS ||
	    up.data.type != MSGPACK_OBJECT_MAP)
		goto done;
	const msgpack_object_map *m = &up.data.via.map;
	for (uint32_t i = 0; i < m->size; i++) {
		const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
		int which = -1, bad = 0;
		for (int w = 0; w < PAYLOAD_KEY_COUNT && which < 0; w++)
			if (obj_key_is(k, payload_keys[w]))
				which = w;
		if (which < 0)
			continue; /* unknown keys are ignored */
		seen |= 1u << which;
		switch (which) {
		case 0: bad = take_str(v, &e->row.settings, 0); break;
		case 1: bad = take_bool(v, &e->row.has_snapshot); break;
		case 2: bad = take_bool(v, &e->row.has_peaks); break;
		case 3: bad = take_u64(v, &e->row.peak_reserved); break;
		case 4: bad = take_u64(v, &e->row.peak_allocated); break;
		case 5:
			bad =
			    v->type != MSGPACK_OBJECT_FLOAT64 && v->type != MSGPACK_OBJECT_FLOAT32;
			if (!bad)
				e->row.fragmentation = v->via.f64;
			break;
		case 6: bad = take_u64(v, &e->row.device_count); break;
		case 7: bad = take_str(v, &e->row.oom_cause, 1); break;
		case 8: bad = take_str(v, &e->row.rec_id, 1); break;
		case 9: bad = take_str(v, &e->row.rec_title, 1); break;
		case 10: bad = take_str(v, &e->row.verdict, 1); break;
		case 11: bad = take_bin(v, &e->json, &e->json_len); break;
		case 12: bad = take_bin(v, &e->html, &e->html_len); break;
		default: break; /* "end" */
		}
		if (bad)
			goto done;
	}
	rc = seen == (1u << PAYLOAD_KEY_COUNT) - 1 ? 0 : -1;
done:
	msgpack_unpacked_destroy(&up);
	if (rc)
		ca_entry_free(e);
	return rc;
}

int ca_decode(const uint8_t *data, size_t len, const h128_digest *key, ca_entry *out)
{
	memset(out, 0, sizeof *out);
	if (len < HEADER_LEN || memcmp(data, magic, 8) != 0 || get_u32(data + 8) != CA_VERSION ||
	    memcmp(data + 12, key->bytes, 16) != 0)
		return -1;
	uint64_t plen = get_u64(data + 28);
	if (plen != len - HEADER_LEN)
		return -1;
	h128_digest ph;
	payload_hash(data + HEADER_LEN, (size_t)plen, &ph);
	if (memcmp(ph.bytes, data + 36, 16) != 0)
		return -1;
	return decode_payload(data + HEADER_LEN, (size_t)plen, out);
}

static char *entry_path(const char *dir, const h128_digest *key)
{
	char hex[33];
	h128_hex(key, hex);
	mr_buf b = {0};
	mr_buf_printf(&b, "%s/%s.mrc", dir, hex);
	if (b.failed) {
		mr_buf_free(&b);
		return NULL;
	}
	return b.data;
}

mr_status ca_get(const char *dir, const h128_digest *key, ca_entry *out, int *hit, mr_error *err)
{
	memset(out, 0, sizeof *out);
	*hit = 0;
	char *path = entry_path(dir, key);
	if (!path)
		return mr_oom(err);
	in_data in;
	mr_error ignored = {0};
	/* Not trusted: a link, a FIFO, a device or a huge file there is a miss, never read. */
	if (in_read_regular(path, CA_MAX_ENTRY_BYTES, &in, &ignored) == MR_OK) {
		*hit = ca_decode(in.data, in.len, key, out) == 0;
		if (*hit && in_check(&in, &ignored)) {
			ca_entry_free(out);
			*hit = 0;
		}
		in_release(&in);
	}
	free(path);
	return MR_OK;
}

mr_status ca_put(const char *dir, const h128_digest *key, const ca_entry *e, mr_error *err)
{
	mr_buf bytes = {0};
	mr_status st = ca_encode(key, e, &bytes, err);
	char *path = NULL;
	if (st)
		goto done;
	path = entry_path(dir, key);
	if (!path) {
		st = mr_oom(err);
		goto done;
	}
	st = out_replace(path, bytes.data, bytes.len, err);
done:
	free(path);
	mr_buf_free(&bytes);
	return st;
}
