/* members.c: the bytes of a run's members, from plain files and zip archives. */
#include "source/members.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "base/error.h"
#include "base/mem.h"
#include "source/input.h"
#include "source/zip.h"

/* ---- the bytes in flight -------------------------------------------------------------------
 * An inflated zip member is heap memory (a mapped file is not: the kernel can drop its pages).
 * Every read of the process draws its members' declared sizes from one budget, so that batch
 * jobs reading big members at the same time wait for each other instead of adding up (four
 * 1.9 GB members with -j 4 reached 7.8 GB). A read takes what all its members need at once,
 * before inflating any: no job holds part of the budget while it waits for more, so none can
 * deadlock. A read larger than the whole budget waits until nothing else is in flight and
 * then runs alone. */
static pthread_mutex_t inflight_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t inflight_freed = PTHREAD_COND_INITIALIZER;
static uint64_t inflight_bytes;

static void inflight_take(uint64_t bytes, uint64_t cap)
{
	if (!bytes)
		return;
	pthread_mutex_lock(&inflight_lock);
	while (inflight_bytes > 0 && (inflight_bytes >= cap || bytes > cap - inflight_bytes))
		pthread_cond_wait(&inflight_freed, &inflight_lock);
	inflight_bytes += bytes;
	pthread_mutex_unlock(&inflight_lock);
}

static void inflight_give(uint64_t bytes)
{
	if (!bytes)
		return;
	pthread_mutex_lock(&inflight_lock);
	inflight_bytes -= bytes;
	pthread_cond_broadcast(&inflight_freed);
	pthread_mutex_unlock(&inflight_lock);
}

typedef struct {
	in_data *in;
	size_t count;
	uint64_t inflight; /* taken from the budget, given back when freed */
} owned_data;

mr_status sr_contents_check(const sr_contents *c, mr_error *err)
{
	const owned_data *o = c->owned;
	for (size_t i = 0; o && i < o->count; i++) {
		mr_error local = {0};
		if (in_check(&o->in[i], &local))
			return mr_fail(err, local.status, "%s: %s", c->names[i], local.msg);
	}
	return MR_OK;
}

static void owned_free(owned_data *o)
{
	if (!o)
		return;
	for (size_t i = 0; i < o->count; i++)
		in_release(&o->in[i]);
	inflight_give(o->inflight);
	free(o->in);
	free(o);
}

void sr_contents_free(sr_contents *c)
{
	owned_free(c->owned);
	free(c->names);
	free(c->data);
	free(c->lens);
	memset(c, 0, sizeof *c);
}

/* The archive opened last, and its path. */
struct sr_reader {
	zp_archive zip;
	char *path;
};

sr_reader *sr_reader_new(void)
{
	return calloc(1, sizeof(sr_reader));
}

void sr_reader_free(sr_reader *rd)
{
	if (!rd)
		return;
	zp_close(&rd->zip);
	free(rd->path);
	free(rd);
}

/* The archive at path, opened once per reader. */
static mr_status zip_for(sr_reader *rd, const char *path, const zp_archive **zip, mr_error *err)
{
	if (!(rd->zip.za && rd->path && strcmp(rd->path, path) == 0)) {
		zp_close(&rd->zip);
		free(rd->path);
		rd->path = NULL;
		mr_status st = zp_open(&rd->zip, path, err);
		if (st)
			return st;
		if (!(rd->path = mr_strdup(path))) {
			zp_close(&rd->zip);
			return mr_oom(err);
		}
	}
	*zip = &rd->zip;
	return MR_OK;
}

mr_status sr_read(sr_reader *rd, const sr_member *members, size_t n, const sr_limits *lim,
                  sr_contents *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	owned_data *o = calloc(1, sizeof *o);
	out->names = mr_alloc_array(n ? n : 1, sizeof *out->names);
	out->data = mr_alloc_array(n ? n : 1, sizeof *out->data);
	out->lens = mr_alloc_array(n ? n : 1, sizeof *out->lens);
	out->owned = o;
	if (o)
		o->in = mr_alloc_array(n ? n : 1, sizeof *o->in);
	if (!o || !o->in || !out->names || !out->data || !out->lens) {
		sr_contents_free(out);
		return mr_oom(err);
	}
	sr_reader *own = rd ? NULL : (rd = sr_reader_new());
	mr_status st = rd ? MR_OK : mr_oom(err);
	/* Declared sizes over the member limit fail below, before anything is inflated. */
	uint64_t want = 0;
	for (size_t i = 0; i < n; i++)
		if (members[i].zip_index >= 0 && members[i].size <= lim->max_member_bytes)
			want = want > UINT64_MAX - members[i].size ? UINT64_MAX
			                                           : want + members[i].size;
	if (!st) {
		inflight_take(want, lim->max_inflight_bytes);
		o->inflight = want;
	}
	for (size_t i = 0; i < n && !st; i++) {
		const sr_member *m = &members[i];
		mr_error local = {0};
		in_data *slot = &o->in[o->count];
		if (m->zip_index < 0) {
			st = in_read(m->path, slot, &local);
		} else {
			const zp_archive *zip = NULL;
			st = zip_for(rd, m->path, &zip, &local);
			if (!st)
				st = zp_read_member(zip, m->zip_index, m->size, lim, slot, &local);
			mr_error changed = {0};
			if (zip && in_check(&zip->map, &changed)) { /* the archive was cut */
				if (!st)
					in_release(slot);
				st = changed.status;
				local = changed;
			}
		}
		if (st) {
			mr_fail(err, st, "%s: %s", m->name, local.msg);
			break;
		}
		o->count++;
		out->names[i] = m->name;
		out->data[i] = slot->data ? slot->data : (const uint8_t *)"";
		out->lens[i] = slot->len;
		out->count++;
	}
	sr_reader_free(own);
	if (st)
		sr_contents_free(out);
	return st;
}

mr_status sr_digest(sr_reader *rd, const sr_member *members, size_t n, const sr_limits *lim,
                    h128_state *h, mr_error *err)
{
	sr_reader *own = rd ? NULL : (rd = sr_reader_new());
	mr_status st = rd ? MR_OK : mr_oom(err);
	const zp_archive *zip = NULL;
	h128_u64(h, n);
	for (size_t i = 0; i < n && !st; i++) {
		const sr_member *m = &members[i];
		mr_error local = {0};
		h128_str(h, m->name);
		if (m->zip_index < 0) {
			in_data in;
			st = in_read(m->path, &in, &local);
			if (!st) {
				h128_str(h, "file");
				h128_u64(h, in.len);
				h128_update(h, in.data, in.len);
				st = in_check(&in, &local);
				in_release(&in);
			}
		} else if (!(st = zip_for(rd, m->path, &zip, &local))) {
			zip_t *za = zip->za;
			zip_stat_t zs;
			zip_file_t *zf = NULL;
			if (zip_stat_index(za, (zip_uint64_t)m->zip_index, 0, &zs) != 0 ||
			    !(zf = zip_fopen_index(za, (zip_uint64_t)m->zip_index,
			                           ZIP_FL_COMPRESSED))) {
				st = mr_fail(&local, MR_EINPUT, "cannot open member: %s",
				             zip_strerror(za));
			} else {
				/* The stored bytes and how to inflate them determine the content.
				 */
				h128_str(h, "zip");
				h128_u64(h, zs.comp_method);
				h128_u64(h, zs.crc);
				h128_u64(h, zs.size);
				h128_u64(h, zs.comp_size);
				uint8_t buf[1 << 16];
				uint64_t total = 0;
				zip_int64_t got;
				while ((got = zip_fread(zf, buf, sizeof buf)) > 0) {
					h128_update(h, buf, (size_t)got);
					total += (uint64_t)got;
					if (total > lim->max_member_bytes)
						break;
				}
				if (in_check(&zip->map, &local))
					st = local.status;
				else if (got < 0)
					st = mr_fail(&local, MR_EINPUT, "corrupt member: %s",
					             zip_file_strerror(zf));
			}
			if (zf)
				zip_fclose(zf);
		}
		if (st)
			mr_fail(err, st, "%s: %s", m->name, local.msg);
	}
	sr_reader_free(own);
	return st;
}
