/* addrmap.c: address -> value hash map (see addrmap.h). */
#include "base/addrmap.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

static size_t slot_of(uint64_t key, size_t cap)
{
	key ^= key >> 29;
	key *= 0xbf58476d1ce4e5b9ull;
	key ^= key >> 32;
	return (size_t)key & (cap - 1);
}

static int grow(am_map *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 4096;
	uint64_t *k = mr_alloc_array(ncap, sizeof *k), *v = mr_alloc_array(ncap, sizeof *v);
	if (!k || !v) {
		free(k);
		free(v);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		size_t h = slot_of(m->keys[i], ncap);
		while (k[h])
			h = (h + 1) & (ncap - 1);
		k[h] = m->keys[i];
		v[h] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = k;
	m->vals = v;
	m->cap = ncap;
	return 0;
}

int am_put(am_map *m, uint64_t addr, uint64_t val)
{
	if ((m->count + 1) * 2 > m->cap && grow(m))
		return -1;
	uint64_t key = addr + 1;
	size_t h = slot_of(key, m->cap);
	while (m->keys[h] && m->keys[h] != key)
		h = (h + 1) & (m->cap - 1);
	if (!m->keys[h])
		m->count++;
	m->keys[h] = key;
	m->vals[h] = val;
	return 0;
}

int am_get(const am_map *m, uint64_t addr, uint64_t *val)
{
	if (!m->cap)
		return 0;
	uint64_t key = addr + 1;
	for (size_t h = slot_of(key, m->cap); m->keys[h]; h = (h + 1) & (m->cap - 1))
		if (m->keys[h] == key) {
			*val = m->vals[h];
			return 1;
		}
	return 0;
}

int am_take(am_map *m, uint64_t addr, uint64_t *val)
{
	if (!m->cap)
		return 0;
	uint64_t key = addr + 1;
	size_t h = slot_of(key, m->cap);
	while (m->keys[h] && m->keys[h] != key)
		h = (h + 1) & (m->cap - 1);
	if (!m->keys[h])
		return 0;
	*val = m->vals[h];
	/* Shift later members of the cluster back so lookups never stop early. */
	size_t hole = h;
	for (size_t j = (h + 1) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1)) {
		size_t home = slot_of(m->keys[j], m->cap);
		if (((j - home) & (m->cap - 1)) >= ((j - hole) & (m->cap - 1))) {
			m->keys[hole] = m->keys[j];
			m->vals[hole] = m->vals[j];
			hole = j;
		}
	}
	m->keys[hole] = 0;
	m->count--;
	return 1;
}

void am_free(am_map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof *m);
}
