/* addrmap.h: a hash map from device addresses to 64-bit values, for replaying traces.
 *
 * Open addressing with backward-shift deletion, so a map that sees millions of inserts and
 * removals never fills with tombstones. Ownership: the map owns its arrays; am_free releases
 * them. Iterate by scanning slots[0..cap): a slot is used when slots[i].key != 0, and holds
 * address slots[i].key - 1 with value slots[i].val. A key and its value share a cache line: a
 * lookup of a large map costs one miss, not two. */
#ifndef MR_ADDRMAP_H
#define MR_ADDRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
	uint64_t key; /* address + 1; 0 = empty */
	uint64_t val;
} am_slot;

typedef struct {
	am_slot *slots;
	size_t cap, count;
} am_map;

/* Sets addr's value. Returns 0, or -1 when memory runs out (the map is unchanged). */
int am_put(am_map *m, uint64_t addr, uint64_t val);
/* Returns 1 and sets *val when addr is present. */
int am_get(const am_map *m, uint64_t addr, uint64_t *val);
/* Removes addr; returns 1 and its value when it was present. */
int am_take(am_map *m, uint64_t addr, uint64_t *val);
void am_free(am_map *m);

#endif
