/* zip.c: zip archives within the limits. */
#include "source/zip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/units.h"

void zp_close(zp_archive *a)
{
	if (a->za)
		zip_discard(a->za);
	in_release(&a->map);
	memset(a, 0, sizeof *a);
}

mr_status zp_open(zp_archive *a, const char *path, mr_error *err)
{
	memset(a, 0, sizeof *a);
	mr_status st = in_read(path, &a->map, err);
	if (st)
		return st;
	zip_error_t ze;
	zip_error_init(&ze);
	zip_source_t *src = zip_source_buffer_create(a->map.data, a->map.len, 0, &ze);
	if (src) {
		a->za = zip_open_from_source(src, ZIP_RDONLY, &ze);
		if (!a->za)
			zip_source_free(src);
	}
	if (!a->za) {
		st = mr_fail(err, MR_EINPUT, "%s", zip_error_strerror(&ze));
		zip_error_fini(&ze);
		zp_close(a);
		return st;
	}
	zip_error_fini(&ze);
	return MR_OK;
}

int64_t zp_entries(const zp_archive *a, const sr_limits *lim, char *msg, size_t msgsz)
{
	zip_int64_t n = zip_get_num_entries(a->za, 0);
	if (n < 0 || (uint64_t)n > lim->max_members) {
		snprintf(msg, msgsz, "archive has %lld entries, over the limit of %zu",
		         (long long)n, lim->max_members);
		return -1;
	}
	/* The declared sizes first: an archive over the total limit is not read at all. */
	uint64_t total = 0;
	for (zip_int64_t i = 0; i < n; i++) {
		zip_stat_t zs;
		if (zip_stat_index(a->za, (zip_uint64_t)i, 0, &zs) == 0 &&
		    (zs.valid & ZIP_STAT_SIZE))
			total = total > UINT64_MAX - zs.size ? UINT64_MAX : total + zs.size;
	}
	if (total > lim->max_total_bytes) {
		snprintf(msg, msgsz, "archive inflates to %llu bytes, over the limit of %llu",
		         (unsigned long long)total, (unsigned long long)lim->max_total_bytes);
		return -1;
	}
	return n;
}

int zp_entry_at(const zp_archive *a, int64_t i, zp_entry *e)
{
	zip_stat_t zs;
	if (zip_stat_index(a->za, (zip_uint64_t)i, 0, &zs) != 0 || !(zs.valid & ZIP_STAT_NAME))
		return -1;
	e->name = zs.name;
	e->size = (zs.valid & ZIP_STAT_SIZE) ? zs.size : 0;
	e->comp_size = (zs.valid & ZIP_STAT_COMP_SIZE) ? zs.comp_size : 0;
	e->encrypted =
	    (zs.valid & ZIP_STAT_ENCRYPTION_METHOD) && zs.encryption_method != ZIP_EM_NONE;
	return 0;
}

int zp_name_unsafe(const char *name)
{
	if (name[0] == '/' || name[0] == '\\')
		return 1;
	if (((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z')) &&
	    name[1] == ':')
		return 1;
	const char *p = name;
	while (*p) {
		size_t n = strcspn(p, "/\\");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return 1;
		p += n;
		if (*p)
			p++;
	}
	return 0;
}

const char *zp_problem(const zp_entry *e, const sr_limits *lim, char *buf, size_t bufsz)
{
	uint64_t comp = e->comp_size ? e->comp_size : 1;
	if (e->encrypted)
		return "encrypted member: not read";
	if (e->size > lim->max_member_bytes) {
		snprintf(buf, bufsz, "member inflates to %llu bytes, over the limit of %llu",
		         (unsigned long long)e->size, (unsigned long long)lim->max_member_bytes);
		return buf;
	}
	if (e->size > MR_MIB && e->size / comp > lim->max_ratio) {
		snprintf(buf, bufsz,
		         "member inflates %llu times (%llu to %llu bytes): refused as a zip bomb",
		         (unsigned long long)(e->size / comp), (unsigned long long)e->comp_size,
		         (unsigned long long)e->size);
		return buf;
	}
	return NULL;
}

int64_t zp_read_head(const zp_archive *a, int64_t i, uint8_t *buf, size_t n)
{
	zip_file_t *zf = zip_fopen_index(a->za, (zip_uint64_t)i, 0);
	zip_int64_t got = zf ? zip_fread(zf, buf, n) : -1;
	if (zf)
		zip_fclose(zf);
	return got;
}

mr_status zp_read_member(const zp_archive *a, int64_t i, uint64_t size, const sr_limits *lim,
                         in_data *out, mr_error *err)
{
	if (size > lim->max_member_bytes)
		return mr_fail(err, MR_EINPUT,
		               "member inflates to %llu bytes, over the limit of %llu",
		               (unsigned long long)size, (unsigned long long)lim->max_member_bytes);
	zip_file_t *zf = zip_fopen_index(a->za, (zip_uint64_t)i, 0);
	if (!zf)
		return mr_fail(err, MR_EINPUT, "cannot open member: %s", zip_strerror(a->za));
	size_t want = (size_t)size;
	uint8_t *buf = malloc(want + 1);
	mr_status st = MR_OK;
	if (!buf) {
		st = mr_oom(err);
		goto done;
	}
	size_t got = 0;
	while (got <= want) {
		zip_int64_t n = zip_fread(zf, buf + got, want + 1 - got);
		if (n < 0) {
			st = mr_fail(err, MR_EINPUT, "corrupt member: %s", zip_file_strerror(zf));
			goto done;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got != want) {
		st = mr_fail(
		    err, MR_EINPUT,
		    "member holds %s bytes than its declared %llu (corrupt or hostile archive)",
		    got > want ? "more" : "fewer", (unsigned long long)size);
		goto done;
	}
	in_adopt(out, buf, got);
	buf = NULL;
done:
	free(buf);
	zip_fclose(zf);
	return st;
}
