/*
 * registry.c - the engine's explicit provider registry.
 *
 * Every provider a component may declare into, or that phase 2 needs to
 * reconcile an undeclared child, is found here by id: root providers by
 * fp(@name), a container's child provider by the container's tsid, an
 * attachment provider by combine(child id, fp(@type)). CocoIndex resolves
 * providers through per-component snapshots, which silently drops the
 * children of a container declared by a sibling mounted later
 * (semantics §7 item 22); one registry keyed by id makes visibility
 * explicit.
 */
#include "engine_int.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "tend/buf.h"

static size_t
slot(const struct registry *r, const struct tend_fp *id)
{
	uint64_t h;

	memcpy(&h, id->b + 8, 8);
	return (size_t)(h & (r->size - 1));
}

void
tend_registry_init(struct registry *r)
{
	r->size = 64;
	r->n = 0;
	r->tab = tend_xcalloc(r->size, sizeof *r->tab);
}

void
tend_provider_free(struct tend_provider *p)
{
	if (!p)
		return;
	if (p->handler)
		p->handler->ops->destroy(p->handler);
	for (size_t i = 0; i < p->natt; i++)
		free(p->att[i].type);
	free(p->att);
	free(p->name);
	tend_buf_release(&p->name_key);
	free(p);
}

void
tend_registry_finish(struct registry *r)
{
	for (size_t i = 0; i < r->size; i++) {
		struct tend_provider *p = r->tab ? r->tab[i] : NULL, *next;

		for (; p; p = next) {
			next = p->hnext;
			tend_provider_free(p);
		}
	}
	free(r->tab);
	r->tab = NULL;
	r->size = r->n = 0;
}

struct tend_provider *
tend_registry_get(struct registry *r, const struct tend_fp *id)
{
	struct tend_provider *p = r->tab[slot(r, id)];

	for (; p; p = p->hnext)
		if (tend_fp_equal(&p->id, id))
			return p;
	return NULL;
}

static void
rehash(struct registry *r)
{
	struct tend_provider **old = r->tab;
	size_t osize = r->size;

	r->size *= 2;
	r->tab = tend_xcalloc(r->size, sizeof *r->tab);
	for (size_t i = 0; i < osize; i++) {
		struct tend_provider *p = old[i], *next;

		for (; p; p = next) {
			next = p->hnext;
			size_t s = slot(r, &p->id);
			p->hnext = r->tab[s];
			r->tab[s] = p;
		}
	}
	free(old);
}

void
tend_registry_put(struct registry *r, struct tend_provider *p)
{
	assert(!tend_registry_get(r, &p->id));
	if (r->n * 2 >= r->size)
		rehash(r);
	size_t s = slot(r, &p->id);
	p->hnext = r->tab[s];
	r->tab[s] = p;
	r->n++;
}

void
tend_registry_remove(struct registry *r, struct tend_provider *p)
{
	struct tend_provider **pp = &r->tab[slot(r, &p->id)];

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == p) {
			*pp = p->hnext;
			p->hnext = NULL;
			r->n--;
			return;
		}
	}
}

static struct tend_provider *
attachment_provider(struct tend_provider *child, const char *type)
{
	struct tend_engine *eng = child->eng;
	struct tend_key sym = tend_key_symbol(type);
	struct tend_fp kfp = tend_fp_key(&sym);
	struct tend_fp id = tend_fp_combine(&child->id, &kfp);
	struct tend_provider *p = tend_registry_get(&eng->reg, &id);

	if (!p) {
		struct tend_buf name = TEND_BUF_INIT;

		p = tend_xcalloc(1, sizeof *p);
		p->id = id;
		p->eng = eng;
		p->attachment = true;
		p->name_key = (struct tend_buf)TEND_BUF_INIT;
		tend_key_encode(&p->name_key, &sym);
		p->name_parent = child->id;
		tend_buf_printf(&name, "%s/@%s", child->name, type);
		p->name = tend_buf_detach(&name, NULL);
		tend_registry_put(&eng->reg, p);
	}
	p->parent_container = child;
	return p;
}

void
tend_provider_resolve(struct tend_provider *p, struct tend_handler *h)
{
	struct tend_attachment att[16];
	size_t n = 0;

	if (p->handler && p->handler != h)
		p->handler->ops->destroy(p->handler);
	p->handler = h;
	for (size_t i = 0; i < p->natt; i++) {
		struct tend_provider *a = p->att[i].prov;

		if (a->handler) {
			a->handler->ops->destroy(a->handler);
			a->handler = NULL;
		}
	}
	if (h && h->ops->attachments)
		n = h->ops->attachments(h, att, 16);
	for (size_t i = 0; i < n; i++) {
		struct tend_provider *a = attachment_provider(p, att[i].type);
		size_t j;

		if (a->handler)
			a->handler->ops->destroy(a->handler);
		a->handler = att[i].handler;
		a->gen_id = p->gen_id;
		a->gen_schema = p->gen_schema;
		for (j = 0; j < p->natt; j++)
			if (p->att[j].prov == a)
				break;
		if (j == p->natt) {
			p->att = tend_xrealloc(p->att,
			    (p->natt + 1) * sizeof *p->att);
			p->att[p->natt].type = tend_xstrdup(att[i].type);
			p->att[p->natt].prov = a;
			p->natt++;
		}
	}
}

void
tend_provider_unregister(struct tend_engine *eng, struct tend_provider *p)
{
	for (size_t i = 0; i < p->natt; i++) {
		struct tend_provider *a = p->att[i].prov;

		tend_registry_remove(&eng->reg, a);
		if (a->handler) {
			a->handler->ops->destroy(a->handler);
			a->handler = NULL;
		}
		a->hnext = eng->graveyard;
		eng->graveyard = a;
		free(p->att[i].type);
	}
	p->natt = 0;
	tend_registry_remove(&eng->reg, p);
	/* components of this pass may still point at it: free after the
	 * pass (tend_registry_reap) */
	if (p->handler) {
		p->handler->ops->destroy(p->handler);
		p->handler = NULL;
	}
	p->hnext = eng->graveyard;
	eng->graveyard = p;
}

void
tend_registry_reap(struct tend_engine *eng)
{
	struct tend_provider *p = eng->graveyard, *next;

	for (; p; p = next) {
		next = p->hnext;
		tend_provider_free(p);
	}
	eng->graveyard = NULL;
}
