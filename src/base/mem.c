/* mem.c: overflow-checked allocation. */
#include "base/mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void *mr_alloc_array(size_t count, size_t size)
{
	if (size && count > SIZE_MAX / size)
		return NULL;
	return calloc(count ? count : 1, size ? size : 1);
}

void *mr_realloc_array(void *ptr, size_t count, size_t size)
{
	if (size && count > SIZE_MAX / size)
		return NULL;
	size_t bytes = count * size;
	return realloc(ptr, bytes ? bytes : 1);
}

char *mr_strndup(const char *s, size_t n)
{
	char *p = malloc(n + 1);
	if (!p)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *mr_strdup(const char *s)
{
	return s ? mr_strndup(s, strlen(s)) : NULL;
}

int mr_grow(void **items, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap : 16;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -1;
		ncap *= 2;
	}
	void *p = mr_realloc_array(*items, ncap, size);
	if (!p)
		return -1;
	*items = p;
	*cap = ncap;
	return 0;
}

void *mr_room_new(size_t bytes)
{
	if (bytes < MR_ROOM_MIN)
		return NULL;
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
#ifdef MADV_HUGEPAGE
	(void)madvise(p, bytes, MADV_HUGEPAGE); /* a hint: without it, 4 KiB pages */
#endif
	return p;
}

void mr_room_free(void *room, size_t bytes)
{
	if (room)
		munmap(room, bytes);
}

void mr_release(void *items, size_t room)
{
	if (room)
		mr_room_free(items, room);
	else
		free(items);
}
