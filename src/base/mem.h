/* mem.h: allocation helpers that fail by returning NULL (never abort), with every count
 * checked for overflow before it is multiplied.
 *
 * Ownership: what they return is the caller's, released with free(), except mr_room_new's,
 * released with mr_room_free(). */
#ifndef MR_MEM_H
#define MR_MEM_H

#include <stddef.h>

void *mr_alloc_array(size_t count, size_t size); /* zeroed, like calloc */
void *mr_realloc_array(void *ptr, size_t count, size_t size);
char *mr_strndup(const char *s, size_t n); /* n bytes of s and a NUL */
char *mr_strdup(const char *s);            /* NULL for NULL (or when memory runs out) */

/* Grows *items (element size `size`) so that at least `need` elements fit. Returns 0 or -1
 * (then *items and *cap are unchanged). */
int mr_grow(void **items, size_t *cap, size_t need, size_t size);
/* The common case, room already there, costs a comparison rather than a call: buffers and
 * the decoder's arrays grow once for thousands of appends. */
static inline int mr_grow_fast(void **items, size_t *cap, size_t need, size_t size)
{
	return need <= *cap ? 0 : mr_grow(items, cap, need, size);
}
/* Room for a large array whose greatest size is known before it fills (a decoder's memo, a
 * trace's events): `bytes` of address space reserved at once, backed by memory only where it is
 * written, in huge pages where the system allows them. It never moves, so an array in it never
 * grows past it: set its capacity to the room's. A trace of millions of entries then takes a
 * few hundred page faults instead of one per 4 KiB (on some virtual machines each costs
 * microseconds). NULL below MR_ROOM_MIN (not worth a mapping) or when the address space cannot
 * be reserved: the caller then grows the array with MR_GROW as usual. */
enum { MR_ROOM_MIN = 16 << 20 };
void *mr_room_new(size_t bytes);
void mr_room_free(void *room, size_t bytes); /* the bytes it was made with; NULL: nothing */
/* For an array that is in a room of `room` bytes, or malloc'ed when room is 0: releases it;
 * makes room for `need` elements (in a room: only when its fixed capacity holds them). */
void mr_release(void *items, size_t room);
static inline int mr_grow_in(void **items, size_t *cap, size_t room, size_t need, size_t size)
{
	return room ? -(need > *cap) : mr_grow_fast(items, cap, need, size);
}
#define MR_GROW_IN(arr, cap, room, need)                                                           \
	mr_grow_in((void **)&(arr), &(cap), (room), (need), sizeof(*(arr)))

#define MR_GROW(arr, cap, need) mr_grow_fast((void **)&(arr), &(cap), (need), sizeof(*(arr)))

#define MR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MR_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
