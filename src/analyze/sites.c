/* sites.c: active blocks grouped by the user's own line. */
#include "analyze/sites.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/allocs.h"
#include "analyze/frames.h"
#include "base/addrmap.h"
#include "base/mem.h"

/* What names a site, in the order a block's stack is asked. */
enum { KEY_OWN, KEY_AUTOGRAD, KEY_LIBRARY, KEY_SHOWN, KEY_NONE };

/* The blocks of one stack (or one backward() call's autograd work). */
typedef struct {
	int kind;
	const md_frame *key; /* the frame that names the site; NULL for AUTOGRAD and NONE */
	const md_frame *user, *lib;
	int autograd;
	uint32_t stack, call;
	uint64_t bytes, requested, blocks;
} part;

int an_usite_unknown(const an_usite *site)
{
	return !site->user && !site->lib && !site->autograd && site->stack == MD_NO_STACK;
}

/* Names part p (its stack, or its owner for autograd). */
static void name_part(const md_snapshot *s, const uint8_t *kinds, uint32_t owner, part *p)
{
	p->call = MD_NO_STACK;
	if (owner != AN_OWNER_NONE) {
		p->autograd = 1;
		p->call = owner < s->stack_count ? owner : MD_NO_STACK;
		p->user = owner < s->stack_count ? an_own_frame_k(s, kinds, owner) : NULL;
		p->kind = p->user ? KEY_OWN : KEY_AUTOGRAD;
		p->key = p->user;
		return;
	}
	p->user = an_own_frame_k(s, kinds, p->stack);
	p->lib = an_library_frame_k(s, kinds, p->stack);
	if (p->user) {
		p->kind = KEY_OWN;
		p->key = p->user;
	} else if (p->lib) {
		p->kind = KEY_LIBRARY;
		p->key = p->lib;
	} else if ((p->key = an_first_shown_k(s, kinds, p->stack)) != NULL) {
		p->kind = KEY_SHOWN;
		p->lib = p->key;
	} else {
		p->kind = KEY_NONE;
	}
}

static int frame_cmp(const md_frame *x, const md_frame *y)
{
	if (!x || !y)
		return (x != NULL) - (y != NULL);
	if (x->filename != y->filename)
		return x->filename < y->filename ? -1 : 1;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return (x->name > y->name) - (x->name < y->name);
}

static int key_cmp(const part *x, const part *y)
{
	if (x->kind != y->kind)
		return x->kind - y->kind;
	return frame_cmp(x->key, y->key);
}

static int part_cmp(const void *a, const void *b)
{
	const part *x = a, *y = b;
	int k = key_cmp(x, y);
	if (k)
		return k;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	if (x->autograd != y->autograd)
		return x->autograd - y->autograd;
	return (x->stack > y->stack) - (x->stack < y->stack);
}

static int site_cmp(const void *a, const void *b)
{
	const an_usite *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	if (x->blocks != y->blocks)
		return x->blocks < y->blocks ? 1 : -1;
	int k = frame_cmp(x->user, y->user);
	if (k)
		return k;
	k = frame_cmp(x->lib, y->lib);
	if (k)
		return k;
	if (x->autograd != y->autograd)
		return x->autograd - y->autograd;
	return (x->stack > y->stack) - (x->stack < y->stack);
}

/* The blocks summed per stack (per owner for autograd work). */
static mr_status gather(const md_snapshot *s, const uint8_t *kinds, const md_block *blocks,
                        const uint32_t *owners, size_t count, part **out, size_t *nout,
                        mr_error *err)
{
	am_map where = {0}; /* (autograd << 40 | stack or owner) -> index into parts */
	part *parts = mr_alloc_array(count ? count : 1, sizeof *parts);
	size_t n = 0;
	uint64_t v;
	if (!parts)
		return mr_oom(err);
	for (size_t i = 0; i < count; i++) {
		const md_block *b = &blocks[i];
		if (b->state == MD_BLOCK_INACTIVE)
			continue;
		uint32_t owner = owners ? owners[i] : AN_OWNER_NONE;
		uint32_t stack = b->stack < s->stack_count ? b->stack : MD_NO_STACK;
		uint64_t key = owner != AN_OWNER_NONE ? (1ull << 40) | owner : stack;
		if (!am_get(&where, key, &v)) {
			v = n;
			parts[n] = (part){0};
			parts[n].stack = stack;
			name_part(s, kinds, owner, &parts[n]);
			n++;
			if (am_put(&where, key, v)) {
				am_free(&where);
				free(parts);
				return mr_oom(err);
			}
		}
		parts[v].bytes += b->size;
		parts[v].requested += b->requested_size;
		parts[v].blocks++;
	}
	am_free(&where);
	*out = parts;
	*nout = n;
	return MR_OK;
}

mr_status an_sites_group(const md_snapshot *s, const uint8_t *kinds, const md_block *blocks,
                         const uint32_t *owners, size_t count, an_usite **out, size_t *out_count,
                         mr_error *err)
{
	part *parts = NULL;
	size_t n = 0, ns = 0;
	*out = NULL;
	*out_count = 0;
	mr_status st = gather(s, kinds, blocks, owners, count, &parts, &n, err);
	if (st)
		return st;
	if (!n) {
		free(parts);
		return MR_OK;
	}
	/* parts of one site are adjacent, its largest first */
	qsort(parts, n, sizeof *parts, part_cmp);
	an_usite *sites = mr_alloc_array(n, sizeof *sites);
	if (!sites) {
		free(parts);
		return mr_oom(err);
	}
	for (size_t i = 0; i < n; i++) {
		const part *p = &parts[i];
		if (!ns || key_cmp(&parts[i - 1], p)) {
			sites[ns++] =
			    (an_usite){p->user, p->lib, p->autograd, 0, 0, 0, p->stack, p->call};
		}
		an_usite *site = &sites[ns - 1];
		site->bytes += p->bytes;
		site->requested += p->requested;
		site->blocks += p->blocks;
	}
	free(parts);
	qsort(sites, ns, sizeof *sites, site_cmp);
	*out = sites;
	*out_count = ns;
	return MR_OK;
}
