/*
 * cxx_connector.cpp - a connector written in C++ against the public
 * headers, linked with libtend and run once: a handler whose reconcile is
 * C++, a sink, three passes, and one call into each header's functions
 * (an extern "C" missing from a header fails the link).
 *
 * The target is a std::map; records are the fingerprint of the value.
 */
#include <tend/arena.h>
#include <tend/buf.h>
#include <tend/engine.h>
#include <tend/events.h>
#include <tend/failpoint.h>
#include <tend/fingerprint.h>
#include <tend/key.h>
#include <tend/plugin.h>
#include <tend/status.h>
#include <tend/target.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

static_assert(alignof(tend_hasher) == 64, "tend_hasher keeps its alignment");

namespace {

int failures;

void
expect(bool ok, const char *what)
{
	if (!ok) {
		std::fprintf(stderr, "FAIL: %s\n", what);
		failures++;
	}
}

/* what the sink does; lives in the reconcile's arena */
struct map_action {
	const char *key;
	const char *value; /* nullptr: erase */
};

struct map_sink {
	tend_sink base; /* first: the engine hands back &base */
	std::map<std::string, std::string> *world;
	unsigned calls;
};

struct map_handler {
	tend_handler base; /* first */
	map_sink *sink;
};

char *
arena_string(tend_arena *a, const void *p, size_t len)
{
	char *s = static_cast<char *>(tend_arena_alloc(a, len + 1));

	std::memcpy(s, p, len);
	s[len] = '\0';
	return s;
}

int
map_reconcile(tend_handler *h, const tend_reconcile_in *in,
    tend_reconcile_out *out)
{
	auto *mh = reinterpret_cast<map_handler *>(h);

	if (in->key->kind != TEND_KEY_STR)
		return tend_error_set(TEND_EINVALID, "map: keys are strings");
	auto *a = static_cast<map_action *>(
	    tend_arena_zalloc(in->arena, sizeof(map_action)));
	a->key = arena_string(in->arena, in->key->u.s.ptr, in->key->u.s.len);
	if (in->desired) {
		tend_fp fp = tend_fp_bytes(in->desired, in->desired_len);

		if (tend_reconcile_settled(in, fp.b, sizeof fp.b))
			return 0;
		a->value = arena_string(in->arena, in->desired,
		    in->desired_len);
		out->record.data = static_cast<const uint8_t *>(
		    tend_arena_memdup(in->arena, fp.b, sizeof fp.b));
		out->record.len = sizeof fp.b;
	} else {
		if (in->nprev == 0 && !in->prev_may_be_missing)
			return 0;
		out->record_absent = true;
	}
	out->action = a;
	out->sink = &mh->sink->base;
	return 0;
}

void
map_apply(tend_sink *sink, tend_context *ctx, void *const *actions,
    size_t n, tend_apply_result *results)
{
	auto *ms = reinterpret_cast<map_sink *>(sink);

	(void)ctx;
	ms->calls++;
	for (size_t i = 0; i < n; i++) {
		auto *a = static_cast<const map_action *>(actions[i]);

		if (std::string(a->key) == "refused") {
			tend_apply_fail(&results[i], TEND_ERROR,
			    "map: %s is refused", a->key);
			continue;
		}
		if (a->value)
			(*ms->world)[a->key] = a->value;
		else
			ms->world->erase(a->key);
	}
}

void
map_destroy(tend_handler *h)
{
	delete reinterpret_cast<map_handler *>(h);
}

const tend_handler_ops map_ops = {
	TEND_TARGET_ABI, "cxx/map", map_reconcile, nullptr, nullptr,
	nullptr, nullptr, map_destroy, 0,
};

/* the declaration function: every "k=v" of the vector */
int
declare_all(tend_comp *c, void *arg)
{
	auto *decls = static_cast<std::vector<std::string> *>(arg);
	tend_provider *p = tend_engine_root(tend_comp_engine(c), "cxx/map");

	for (const std::string &d : *decls) {
		size_t eq = d.find('=');
		std::string k = d.substr(0, eq), v = d.substr(eq + 1);
		tend_key key = tend_key_strn(k.data(), k.size());
		int rc = tend_declare(c, p, &key, v.data(), v.size());

		if (rc)
			return rc;
	}
	return 0;
}

struct seen {
	unsigned applied, failed, bad_error;
};

void
on_event(const tend_event *ev, void *arg)
{
	auto *s = static_cast<seen *>(arg);

	if (ev->kind == TEND_EV_ACTION_APPLIED) {
		s->applied++;
		s->bad_error += ev->error != nullptr;
	} else if (ev->kind == TEND_EV_ACTION_FAILED) {
		s->failed++;
		s->bad_error += ev->error == nullptr;
	}
}

int
pass(tend_engine *eng, std::vector<std::string> decls, tend_stats *st)
{
	return tend_engine_run(eng, "cxx", declare_all, &decls, nullptr, st);
}

} // namespace

int
main()
{
	const char *tmp = std::getenv("TMPDIR");
	std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") +
	    "/tend-cxx-XXXXXX";
	std::vector<char> tmpl(dir.begin(), dir.end());
	tmpl.push_back('\0');
	if (!mkdtemp(tmpl.data())) {
		std::perror("mkdtemp");
		return 2;
	}
	dir = tmpl.data();

	/* the headers' inline and plain functions, from C++ */
	tend_hasher h;
	tend_hasher_init(&h);
	tend_hasher_str(&h, "x");
	tend_fp a = tend_hasher_final(&h), b = tend_fp_str("x");
	expect(tend_fp_equal(&a, &b), "hasher == tend_fp_str");
	tend_buf buf = TEND_BUF_INIT;
	tend_key ks[] = {tend_key_none(), tend_key_bool(true),
	    tend_key_int(42), tend_key_strn("s", 1)};
	tend_key tuple = tend_key_tuple(ks, 4);
	tend_key_format(&buf, &tuple);
	expect(std::string(buf.ptr) == "(none, true, 42, \"s\")",
	    "tend_key_format of a tuple");
	tend_buf_release(&buf);
	tend_arena arena = TEND_ARENA_INIT;
	tend_entry entry;
	expect(!tend_entry_decode("no", 2, &entry, &arena),
	    "tend_entry_decode refuses garbage");
	tend_arena_finish(&arena);
	expect(tend_failpoint("cxx-point", nullptr) == 0, "no failpoint armed");
	expect(std::string(tend_status_name(TEND_ECONFLICT)) == "ECONFLICT",
	    "tend_status_name");

	tend_engine *eng;
	if (tend_engine_open(&eng, (dir + "/state").c_str(), nullptr)) {
		std::fprintf(stderr, "open: %s\n", tend_error_last());
		return 2;
	}
	std::map<std::string, std::string> world;
	map_sink sink = {{map_apply, "cxx/map"}, &world, 0};
	auto *mh = new map_handler;
	tend_handler_init(&mh->base, &map_ops);
	mh->sink = &sink;
	expect(tend_engine_register_root(eng, "cxx/map", &mh->base,
		   nullptr) == 0, "register");
	seen s = {0, 0, 0};
	tend_engine_subscribe(eng,
	    TEND_EV_MASK(TEND_EV_ACTION_APPLIED) |
		TEND_EV_MASK(TEND_EV_ACTION_FAILED),
	    on_event, &s);

	tend_stats st;
	expect(pass(eng, {"a=1", "b=2"}, &st) == 0, "first pass");
	expect(world.size() == 2 && world["a"] == "1" && world["b"] == "2",
	    "the map holds a and b");
	expect(st.applied == 2, "two actions");
	expect(pass(eng, {"a=1", "b=2"}, &st) == 0 && st.applied == 0 &&
		sink.calls == 1, "settled: nothing to do");
	expect(pass(eng, {"a=3", "refused=x"}, &st) != 0, "a refused write");
	expect(world.size() == 1 && world["a"] == "3", "a updated, b erased");
	expect(st.applied == 2 && st.failed == 1, "the third pass's stats");
	expect(s.applied == 4 && s.failed == 1 && s.bad_error == 0,
	    "events: error NULL on success, set on failure");
	tend_engine_close(eng);
	std::filesystem::remove_all(dir);
	if (failures)
		return 1;
	std::printf("ok\n");
	return 0;
}
