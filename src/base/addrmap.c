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
	am_slot *t = mr_alloc_array(ncap, sizeof *t);
	if (!t)
		return -1;
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->slots[i].key)
			continue;
		size_t h = slot_of(m->slots[i].key, ncap);
		while (t[h].key)
			h = (h + 1) & (ncap - 1);
		t[h] = m->slots[i];
	}
	free(m->slots);
	m->slots = t;
	m->cap = ncap;
	return 0;
}

int am_put(am_map *m, uint64_t addr, uint64_t val)
{
	if ((m->count + 1) * 2 > m->cap && grow(m))
		return -1;
	uint64_t key = addr + 1;
	size_t h = slot_of(key, m->cap);
	while (m->slots[h].key && m->slots[h].key != key)
		h = (h + 1) & (m->cap - 1);
	if (!m->slots[h].key)
		m->count++;
	m->slots[h] = (am_slot){key, val};
	return 0;
}

int am_get(const am_map *m, uint64_t addr, uint64_t *val)
{
	if (!m->cap)
		return 0;
	uint64_t key = addr + 1;
	for (size_t h = slot_of(key, m->cap); m->slots[h].key; h = (h + 1) & (m->cap - 1))
		if (m->slots[h].key == key) {
			*val = m->slots[h].val;
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
	while (m->slots[h].key && m->slots[h].key != key)
		h = (h + 1) & (m->cap - 1);
	if (!m->slots[h].key)
		return 0;
	*val = m->slots[h].val;
	/* Shift later members of the cluster back so lookups never stop early. */
	size_t hole = h;
	for (size_t j = (h + 1) & (m->cap - 1); m->slots[j].key; j = (j + 1) & (m->cap - 1)) {
		size_t home = slot_of(m->slots[j].key, m->cap);
		if (((j - home) & (m->cap - 1)) >= ((j - hole) & (m->cap - 1))) {
			m->slots[hole] = m->slots[j];
			hole = j;
		}
	}
	m->slots[hole].key = 0;
	m->count--;
	return 1;
}

void am_free(am_map *m)
{
	free(m->slots);
	memset(m, 0, sizeof *m);
}
