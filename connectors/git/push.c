/*
 * push.c - a git target's ref pushed to a remote (push = REMOTE), with
 * libgit2's transports: file://, git://, ssh (the user's agent or key
 * files; host keys checked against known_hosts by libgit2 itself) and
 * https (credentials from `git credential fill`, never a prompt).
 *
 * Never a force push. What the remote last had of the ref is kept in a
 * tracking ref of the local repository (refs/remotes/NAME/BRANCH for a
 * named remote), moved only after a push or a fetch succeeded: "ahead"
 * is the local commits that ref lacks, so it survives a kill with no
 * state of its own, and a push that never happened is seen by the next
 * run.
 *
 * A push the remote refuses because it moved (non-fast-forward) fetches
 * the remote's tip and merges tend's work onto it: the new tree is the
 * remote tip's tree with the paths the local side changed since the
 * merge base taken from the local tip (deletions too), so whatever the
 * remote has that tend did not change stays as it is; with `exclusive`
 * the prefix's subtree is the local one whole. The commit has the
 * remote's tip as first parent and the local tip as second, so both the
 * remote and the local ref move by fast-forward, and nothing either side
 * had is lost. The local ref moves by compare-and-swap (a pass may commit
 * meanwhile: then start again), and the push is tried again, a bounded
 * number of times with backoff and jitter.
 */
#define _GNU_SOURCE
#include "git.h"

#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tend/failpoint.h"
#include "tend/fingerprint.h"
#include "tend/status.h"
#include "writes.h"

extern char **environ;

#define PUSH_TRIES 5
#define CRED_TRIES 4

struct push_ctx {
	const struct tend_git_push *p;
	char *refused;		/* the remote's status for our ref */
	struct tend_buf remote; /* "remote: ..." lines, the last ones */
	unsigned ncred;
	bool helper_tried;
};

/* ---- callbacks ---- */

static int
on_update(const char *refname, const char *status, void *data)
{
	struct push_ctx *x = data;

	if (status && !x->refused)
		x->refused = tend_xstrdup(status);
	(void)refname;
	return 0;
}

static int
on_sideband(const char *str, int len, void *payload)
{
	struct push_ctx *x = payload;

	if (len <= 0)
		return 0;
	/* keep the tail: the reason a hook gives comes last */
	if (x->remote.len > 2048) {
		size_t keep = 1024;
		memmove(x->remote.ptr, x->remote.ptr + x->remote.len - keep,
		    keep);
		x->remote.len = keep;
		x->remote.ptr[keep] = '\0';
	}
	tend_buf_put(&x->remote, str, (size_t)len);
	return 0;
}

/* `git credential fill` for `url`: the user's helpers, no prompt. */
static int
helper_fill(const char *url, char **user, char **pass)
{
	int in[2] = {-1, -1}, out[2] = {-1, -1}, st = 0, rc = -1;
	posix_spawn_file_actions_t fa;
	char *argv[] = {(char *)"git", (char *)"credential", (char *)"fill",
	    NULL};
	struct tend_buf req = TEND_BUF_INIT, ans = TEND_BUF_INIT;
	pid_t pid;
	size_t nenv = 0;

	*user = *pass = NULL;
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		goto out;
	for (char **e = environ; *e; e++)
		nenv++;
	char **envp = tend_xcalloc(nenv + 3, sizeof *envp);
	size_t k = 0;
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "GIT_TERMINAL_PROMPT=", 20) != 0 &&
		    strncmp(*e, "GIT_ASKPASS=", 12) != 0)
			envp[k++] = *e;
	/* no terminal prompt, and an empty GIT_ASKPASS stops git from
	 * trying core.askPass and SSH_ASKPASS (a dialog) too */
	envp[k++] = (char *)"GIT_TERMINAL_PROMPT=0";
	envp[k++] = (char *)"GIT_ASKPASS=";
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	int sp = posix_spawnp(&pid, "git", &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	free(envp);
	close(in[0]);
	close(out[1]);
	in[0] = out[1] = -1;
	if (sp != 0)
		goto out;
	tend_buf_printf(&req, "url=%s\n\n", url);
	void (*was)(int) = signal(SIGPIPE, SIG_IGN);
	(void)!write(in[1], req.ptr, req.len);
	signal(SIGPIPE, was);
	close(in[1]);
	in[1] = -1;
	char buf[1024];
	ssize_t n;
	while ((n = read(out[0], buf, sizeof buf)) > 0)
		tend_buf_put(&ans, buf, (size_t)n);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		goto out;
	for (char *l = ans.ptr; *l;) {
		char *nl = strchr(l, '\n');

		if (nl)
			*nl = '\0';
		if (strncmp(l, "username=", 9) == 0 && !*user)
			*user = tend_xstrdup(l + 9);
		else if (strncmp(l, "password=", 9) == 0 && !*pass)
			*pass = tend_xstrdup(l + 9);
		if (!nl)
			break;
		l = nl + 1;
	}
	rc = *user && *pass && **pass ? 0 : -1;
out:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
	}
	if (rc) {
		free(*user);
		free(*pass);
		*user = *pass = NULL;
	}
	tend_buf_release(&req);
	tend_buf_release(&ans);
	return rc;
}

/*
 * Credentials, each kind tried once: for ssh the agent, then the usual
 * key files; for https what the git credential helpers know. Asked
 * again after the last one failed, it gives up (libgit2 would ask for
 * ever).
 */
static int
on_credentials(git_credential **out, const char *url, const char *user,
    unsigned int allowed, void *payload)
{
	struct push_ctx *x = payload;
	static const char *const keys[] = {"id_ed25519", "id_ecdsa", "id_rsa"};
	unsigned step = x->ncred++;

	if (step >= CRED_TRIES + 1) {
		git_error_set_str(GIT_ERROR_NET, "authentication failed "
						 "(the ssh agent, ~/.ssh keys and "
						 "git's credential helpers tried)");
		return GIT_EAUTH;
	}
	/* no user in the URL: the login name, as ssh itself does */
	const struct passwd *pw = user ? NULL : getpwuid(getuid());
	const char *u = user ? user : pw ? pw->pw_name : "git";

	if (allowed & GIT_CREDENTIAL_USERNAME)
		return git_credential_username_new(out, u);
	if (allowed & GIT_CREDENTIAL_SSH_KEY) {
		const char *home = getenv("HOME");

		if (step == 0 && getenv("SSH_AUTH_SOCK"))
			return git_credential_ssh_key_from_agent(out, u);
		for (size_t i = step ? step - 1 : 0;
		     home && i < sizeof keys / sizeof *keys; i++) {
			struct tend_buf priv = TEND_BUF_INIT, pub = TEND_BUF_INIT;
			int rc = GIT_PASSTHROUGH;

			tend_buf_printf(&priv, "%s/.ssh/%s", home, keys[i]);
			tend_buf_printf(&pub, "%s.pub", priv.ptr);
			if (access(priv.ptr, R_OK) == 0) {
				x->ncred = (unsigned)i + 2;
				rc = git_credential_ssh_key_new(out, u,
				    access(pub.ptr, R_OK) == 0 ? pub.ptr : NULL,
				    priv.ptr, NULL);
			}
			tend_buf_release(&priv);
			tend_buf_release(&pub);
			if (rc != GIT_PASSTHROUGH)
				return rc;
		}
	}
	if ((allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT) && !x->helper_tried) {
		char *name = NULL, *pass = NULL;
		int rc;

		x->helper_tried = true;
		if (helper_fill(url, &name, &pass) == 0) {
			rc = git_credential_userpass_plaintext_new(out, name,
			    pass);
			free(name);
			free(pass);
			return rc;
		}
	}
	git_error_set_str(GIT_ERROR_NET, "no credentials for this remote "
					 "(none in the ssh agent, ~/.ssh or "
					 "git's credential helpers)");
	return GIT_EAUTH;
}

static void
callbacks(git_remote_callbacks *cb, struct push_ctx *x)
{
	git_remote_init_callbacks(cb, GIT_REMOTE_CALLBACKS_VERSION);
	cb->credentials = on_credentials;
	cb->push_update_reference = on_update;
	cb->sideband_progress = on_sideband;
	/* no certificate_check: libgit2 checks TLS certificates and ssh
	 * host keys (known_hosts) itself */
	cb->payload = x;
}

/* ---- names ---- */

bool
tend_git_push_is_url(const char *remote)
{
	return strchr(remote, ':') || strchr(remote, '/');
}

void
tend_git_push_tracking(struct tend_buf *out, const char *remote,
    const char *remote_ref, const char *app)
{
	const char *branch = strncmp(remote_ref, "refs/heads/", 11) == 0
	    ? remote_ref + 11
	    : remote_ref + 5;

	if (tend_git_push_is_url(remote)) {
		/* keyed by the URL too: another URL is another remote,
		 * which has seen nothing yet */
		struct tend_hasher h;
		struct tend_fp fp;

		tend_hasher_init(&h);
		tend_hasher_str(&h, remote);
		fp = tend_hasher_final(&h);
		tend_buf_printf(out, "refs/tend/remotes/%s/", app);
		for (int i = 0; i < 6; i++)
			tend_buf_printf(out, "%02x", fp.b[i]);
		tend_buf_printf(out, "/%s", branch);
	} else
		tend_buf_printf(out, "refs/remotes/%s/%s", remote, branch);
}

/* ---- helpers ---- */

static int
fail(int code, const char *what, const struct tend_git_push *p)
{
	const git_error *e = git_error_last();

	return tend_error_set(code, "push to %s failed: %s%s%s", p->remote,
	    what ? what : "", what ? ": " : "",
	    e && e->message ? e->message : "libgit2 gave no reason");
}

/*
 * url.BASE.insteadOf (and pushInsteadOf, first) applied to `url`: the
 * longest BASE that begins it wins, as git does. Done here because
 * libgit2 1.5's own (a regex over the config) leaks its match data.
 */
static void
rewrite_url(git_config *cfg, const char *url, struct tend_buf *out)
{
	git_config_iterator *it = NULL;
	git_config_entry *e;
	size_t best = 0;
	int best_push = 0;

	tend_buf_puts(out, url);
	if (git_config_iterator_new(&it, cfg))
		goto out;
	while (git_config_next(&e, it) == 0) {
		const char *n = e->name, *v = e->value;
		size_t nl = strlen(n), vl = v ? strlen(v) : 0;
		int push;

		if (strncasecmp(n, "url.", 4) != 0 || !v)
			continue;
		if (nl > 18 && strcasecmp(n + nl - 14, ".pushinsteadof") == 0)
			push = 1;
		else if (nl > 14 && strcasecmp(n + nl - 10, ".insteadof") == 0)
			push = 0;
		else
			continue;
		if (strncmp(url, v, vl) != 0 || vl < best ||
		    (vl == best && push <= best_push))
			continue;
		best = vl;
		best_push = push;
		tend_buf_reset(out);
		tend_buf_put(out, n + 4, nl - 4 - (push ? 14 : 10));
		tend_buf_puts(out, url + vl);
	}
out:
	git_config_iterator_free(it);
	git_error_clear();
}

static int
open_remote(git_repository *repo, const struct tend_git_push *p,
    git_remote **out)
{
	git_remote_create_options o;
	git_config *cfg = NULL;
	git_buf set = {0};
	struct tend_buf key = TEND_BUF_INIT, url = TEND_BUF_INIT;
	const char *base = p->remote;
	int rc = 0;

	if (git_repository_config_snapshot(&cfg, repo)) {
		rc = fail(TEND_ERROR, "read the repository's config", p);
		goto out;
	}
	if (!tend_git_push_is_url(p->remote)) {
		tend_buf_printf(&key, "remote.%s.pushurl", p->remote);
		if (git_config_get_string_buf(&set, cfg, key.ptr)) {
			tend_buf_reset(&key);
			tend_buf_printf(&key, "remote.%s.url", p->remote);
			if (git_config_get_string_buf(&set, cfg, key.ptr)) {
				git_error_clear();
				rc = tend_error_set(TEND_ERROR,
				    "push to %s failed: the repository has no "
				    "such remote (git remote add %s URL), and "
				    "it is not a URL", p->remote, p->remote);
				goto out;
			}
		}
		base = set.ptr;
	}
	rewrite_url(cfg, base, &url);
	git_remote_create_options_init(&o, GIT_REMOTE_CREATE_OPTIONS_VERSION);
	o.repository = repo;
	o.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF |
	    GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
	if (git_remote_create_with_opts(out, url.ptr, &o))
		rc = fail(TEND_ERROR, "the remote", p);
out:
	git_buf_dispose(&set);
	git_config_free(cfg);
	tend_buf_release(&key);
	tend_buf_release(&url);
	return rc;
}

/* after a rejection: 100 ms, 200 ms, 400 ms... plus up to as much again */
static void
backoff(int attempt)
{
	long ms = 100L << (attempt < 6 ? attempt : 6);
	struct timespec ts;

	ms += (long)((unsigned)rand() % (unsigned)ms);
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static bool
ref_id(git_repository *repo, const char *ref, git_oid *out)
{
	if (git_reference_name_to_id(out, repo, ref) == 0)
		return true;
	git_error_clear();
	return false;
}

/* ---- ahead and behind ---- */

int
tend_git_push_ahead(const struct tend_git_push *p, struct tend_git_ahead *out)
{
	git_repository *repo = NULL;
	git_revwalk *walk = NULL;
	git_oid local, seen, id;
	struct tend_buf track = TEND_BUF_INIT;
	int rc = 0;

	memset(out, 0, sizeof *out);
	git_libgit2_init();
	if (git_repository_open_ext(&repo, p->repo,
		GIT_REPOSITORY_OPEN_NO_SEARCH, NULL)) {
		rc = fail(TEND_ERROR, "open the repository", p);
		goto out;
	}
	tend_git_push_tracking(&track, p->remote, p->remote_ref, p->app);
	out->has_local = ref_id(repo, p->ref, &local);
	out->has_seen = ref_id(repo, track.ptr, &seen);
	if (!out->has_local)
		goto out;
	if (out->has_seen) {
		if (git_graph_ahead_behind(&out->ahead, &out->behind, repo,
			&local, &seen))
			rc = fail(TEND_ERROR, "ahead/behind", p);
		goto out;
	}
	/* never pushed: every commit of the ref is ahead */
	if (git_revwalk_new(&walk, repo) || git_revwalk_push(walk, &local)) {
		rc = fail(TEND_ERROR, "count commits", p);
		goto out;
	}
	while (git_revwalk_next(&id, walk) == 0)
		out->ahead++;
	git_error_clear();
out:
	git_revwalk_free(walk);
	tend_buf_release(&track);
	git_repository_free(repo);
	return rc;
}

/* ---- the merge onto the remote's tip ---- */

/*
 * The removals first, then the upserts onto what they leave (a path
 * that changes between file and directory), as git.c does.
 */
static int
apply_updates(git_repository *repo, git_tree *base, git_tree_update *ups,
    size_t n, git_oid *out)
{
	git_tree_update *sorted = tend_xcalloc(n + 1, sizeof *sorted);
	git_tree *mid = NULL;
	git_oid mid_id;
	size_t nrm = 0, k;
	int rc;

	for (size_t i = 0; i < n; i++)
		if (ups[i].action == GIT_TREE_UPDATE_REMOVE)
			sorted[nrm++] = ups[i];
	k = nrm;
	for (size_t i = 0; i < n; i++)
		if (ups[i].action != GIT_TREE_UPDATE_REMOVE)
			sorted[k++] = ups[i];
	if (n == 0) {
		git_oid_cpy(out, git_tree_id(base));
		rc = 0;
	} else if (nrm == 0 || nrm == n)
		rc = git_tree_create_updated(out, repo, base, n, sorted);
	else if ((rc = git_tree_create_updated(&mid_id, repo, base, nrm,
		      sorted)) == 0 &&
	    (rc = git_tree_lookup(&mid, repo, &mid_id)) == 0)
		rc = git_tree_create_updated(out, repo, mid, n - nrm,
		    sorted + nrm);
	git_tree_free(mid);
	free(sorted);
	return rc;
}

static bool
under(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	return n && strncmp(path, prefix, n) == 0 &&
	    (path[n] == '/' || path[n] == '\0');
}

struct edits {
	git_tree_update *v;
	size_t n, size;
	struct tend_buf paths; /* NUL-separated, pointed into after */
	size_t *off;
};

static void
edit(struct edits *e, git_tree_update_t action, const char *path,
    const git_oid *id, git_filemode_t mode)
{
	if (e->n == e->size) {
		e->size = e->size ? 2 * e->size : 16;
		e->v = tend_xrealloc(e->v, e->size * sizeof *e->v);
		e->off = tend_xrealloc(e->off, e->size * sizeof *e->off);
	}
	memset(&e->v[e->n], 0, sizeof e->v[e->n]);
	e->v[e->n].action = action;
	if (id)
		git_oid_cpy(&e->v[e->n].id, id);
	e->v[e->n].filemode = mode;
	e->off[e->n] = e->paths.len;
	tend_buf_put(&e->paths, path, strlen(path) + 1);
	e->n++;
}

/*
 * The tree of the merge: `remote`'s tree with the changes from `base`'s
 * tree to `local`'s (NULL base: everything local has), and with
 * `exclusive` the prefix's subtree is local's whole.
 */
static int
merged_tree(git_repository *repo, const struct tend_git_push *p,
    git_tree *base, git_tree *local, git_tree *remote, git_oid *out)
{
	git_diff *diff = NULL;
	struct edits e = {0};
	git_tree_entry *pe = NULL, *re = NULL;
	int rc;

	e.paths = (struct tend_buf)TEND_BUF_INIT;
	if ((rc = git_diff_tree_to_tree(&diff, repo, base, local, NULL)))
		goto out;
	const char *prefix = p->prefix ? p->prefix : "";
	bool whole = p->exclusive; /* the prefix's subtree goes whole */
	for (size_t i = 0; i < git_diff_num_deltas(diff); i++) {
		const git_diff_delta *d = git_diff_get_delta(diff, i);

		if (whole && (!prefix[0] || under(d->new_file.path, prefix)))
			continue;
		if (d->status == GIT_DELTA_DELETED) {
			git_tree_entry *x = NULL;

			/* gone on the remote too: nothing to remove */
			if (git_tree_entry_bypath(&x, remote,
				d->old_file.path) == 0)
				edit(&e, GIT_TREE_UPDATE_REMOVE,
				    d->old_file.path, NULL, 0);
			git_tree_entry_free(x);
			git_error_clear();
		} else
			edit(&e, GIT_TREE_UPDATE_UPSERT, d->new_file.path,
			    &d->new_file.id, (git_filemode_t)d->new_file.mode);
	}
	if (whole && !prefix[0]) {
		git_oid_cpy(out, git_tree_id(local));
		goto out;
	}
	if (whole) {
		bool in_local = git_tree_entry_bypath(&pe, local, prefix) == 0;
		bool in_remote = git_tree_entry_bypath(&re, remote, prefix) == 0;

		git_error_clear();
		if (in_remote)
			edit(&e, GIT_TREE_UPDATE_REMOVE, prefix, NULL, 0);
		if (in_local)
			edit(&e, GIT_TREE_UPDATE_UPSERT, prefix,
			    git_tree_entry_id(pe), git_tree_entry_filemode(pe));
	}
	for (size_t i = 0; i < e.n; i++)
		e.v[i].path = e.paths.ptr + e.off[i];
	rc = apply_updates(repo, remote, e.v, e.n, out);
out:
	if (rc)
		rc = fail(TEND_ERROR, "merge onto the remote's tip", p);
	git_tree_entry_free(pe);
	git_tree_entry_free(re);
	git_diff_free(diff);
	free(e.v);
	free(e.off);
	tend_buf_release(&e.paths);
	return rc;
}

/*
 * Merge the local tip onto the remote's (`theirs`) and move the local
 * ref there if it is still `ours`. TEND_ECONFLICT: it moved (a pass
 * committed): start again.
 */
static int
merge_onto(git_repository *repo, const struct tend_git_push *p,
    const git_oid *ours, const git_oid *theirs)
{
	git_commit *lc = NULL, *rc_ = NULL, *bc = NULL;
	git_tree *lt = NULL, *rt = NULL, *bt = NULL, *nt = NULL;
	git_signature *author = NULL, *committer = NULL;
	git_reference *ref = NULL;
	struct tend_buf msg = TEND_BUF_INIT;
	git_oid base, tree, commit;
	int rc;

	if (git_commit_lookup(&lc, repo, ours) ||
	    git_commit_lookup(&rc_, repo, theirs) ||
	    git_commit_tree(&lt, lc) || git_commit_tree(&rt, rc_)) {
		rc = fail(TEND_ERROR, "read the tips", p);
		goto out;
	}
	/* no common history: everything local has is tend's to apply */
	if (git_merge_base(&base, repo, ours, theirs) == 0) {
		if (git_commit_lookup(&bc, repo, &base) ||
		    git_commit_tree(&bt, bc)) {
			rc = fail(TEND_ERROR, "read the merge base", p);
			goto out;
		}
	}
	git_error_clear();
	if ((rc = merged_tree(repo, p, bt, lt, rt, &tree)))
		goto out;
	if (git_tree_lookup(&nt, repo, &tree) ||
	    tend_git_signature(repo, p->author, &author) ||
	    tend_git_signature(repo, NULL, &committer)) {
		rc = fail(TEND_ERROR, "prepare the merge", p);
		goto out;
	}
	tend_buf_printf(&msg, "tend: merge %s onto %s %s\n\nThe remote moved: "
			      "tend's changes since the merge base, onto "
			      "its tip.\n", p->ref, p->remote, p->remote_ref);
	const git_commit *parents[2] = {rc_, lc};
	if (git_commit_create(&commit, repo, NULL, author, committer, "UTF-8",
		msg.ptr, nt, 2, parents)) {
		rc = fail(TEND_ERROR, "commit the merge", p);
		goto out;
	}
	tend_git_locks_note(repo, p->ref, &commit);
	rc = git_reference_create_matching(&ref, repo, p->ref, &commit, 1,
	    ours, "tend: push: onto the remote's tip");
	if (rc == GIT_EMODIFIED) {
		git_error_clear();
		rc = TEND_ECONFLICT;
	} else if (rc)
		rc = fail(TEND_ERROR, "move the local ref", p);
	else /* tend's tags kept on the tip follow it */
		tend_git_tags_follow(repo, p->ref, ours, &commit);
out:
	git_reference_free(ref);
	git_signature_free(author);
	git_signature_free(committer);
	git_tree_free(nt);
	git_tree_free(bt);
	git_tree_free(rt);
	git_tree_free(lt);
	git_commit_free(bc);
	git_commit_free(rc_);
	git_commit_free(lc);
	tend_buf_release(&msg);
	return rc;
}

/* ---- push ---- */

/* The remote's messages, one line, for an error ("remote: ..." lines) */
static void
remote_says(struct tend_buf *out, const struct tend_buf *said)
{
	bool space = false;

	for (size_t i = 0; i < said->len; i++) {
		unsigned char ch = (unsigned char)said->ptr[i];

		if (ch == '\n' || ch == '\r' || ch == '\t' || ch == ' ')
			space = out->len > 0;
		else if (ch >= 0x20) {
			if (space)
				tend_buf_putc(out, ' ');
			space = false;
			tend_buf_putc(out, (char)ch);
		}
	}
}

/* the remote's ref moved between its advertisement and our update */
static bool
is_nonff(const char *status)
{
	return strstr(status, "non-fast-forward") ||
	    strstr(status, "fetch first") || strstr(status, "stale info") ||
	    strstr(status, "failed to update ref") ||
	    strstr(status, "but expected");
}

/* How one attempt went. */
enum outcome { PUSHED, MOVED, REFUSED, UNREACHABLE };

/*
 * A push to a repository on this machine (file:// or a path). libgit2's
 * local transport writes the remote's ref with force, whatever it holds
 * by then: two pushers that both saw the same tip overwrite each other
 * (a race run by hand lost 6 of 379 updates). Here the objects go over as
 * one pack and the ref moves by compare-and-swap from the tip this push
 * built on, as receive-pack does for git:// and ssh: a ref that moved is
 * MOVED (fetch, merge, push again), never overwritten. Hooks do not run
 * (nor do they with libgit2's transport).
 */
static enum outcome
push_local(git_repository *repo, const char *path,
    const struct tend_git_push *p)
{
	git_repository *rr = NULL;
	git_packbuilder *pb = NULL;
	git_revwalk *walk = NULL;
	git_reference *ref = NULL;
	struct tend_buf dir = TEND_BUF_INIT;
	git_oid local, old;
	bool has_old;
	enum outcome o = UNREACHABLE;
	int rc;

	if (!ref_id(repo, p->ref, &local))
		return PUSHED; /* nothing to push */
	if (git_repository_open_ext(&rr, path, GIT_REPOSITORY_OPEN_NO_SEARCH,
		NULL)) {
		fail(TEND_ERETRY, "open the remote", p);
		return UNREACHABLE;
	}
	has_old = ref_id(rr, p->remote_ref, &old);
	if (has_old && !git_oid_equal(&old, &local) &&
	    git_graph_descendant_of(repo, &local, &old) != 1) {
		git_error_clear();
		o = MOVED; /* theirs is not under ours (or not here yet) */
		goto out;
	}
	if (has_old && git_oid_equal(&old, &local)) {
		o = PUSHED;
		goto out;
	}
	/* the objects the remote lacks: ours, but what its tip has */
	if (git_packbuilder_new(&pb, repo) || git_revwalk_new(&walk, repo) ||
	    git_revwalk_push(walk, &local) ||
	    (has_old && git_revwalk_hide(walk, &old)) ||
	    git_packbuilder_insert_walk(pb, walk)) {
		fail(TEND_ERROR, "pack the objects to push", p);
		goto out;
	}
	tend_buf_printf(&dir, "%sobjects/pack", git_repository_commondir(rr));
	if (git_packbuilder_object_count(pb) &&
	    git_packbuilder_write(pb, dir.ptr, 0, NULL, NULL)) {
		fail(TEND_ERETRY, "write the objects to the remote", p);
		goto out;
	}
	git_error_clear();
	/* a ref that is not there yet: the zero id as the one to match, so
	 * that "not there" is checked under the ref's lock too
	 * (git_reference_create without force checks it before taking the
	 * lock: two first pushes both saw no ref, and the second overwrote
	 * the first's) */
	if (!has_old)
		memset(&old, 0, sizeof old);
	rc = git_reference_create_matching(&ref, rr, p->remote_ref, &local,
	    1, &old, "tend: push");
	/* (a libgit2 older than 1.1 takes no zero id for "not there") */
	if (rc == GIT_ENOTFOUND && !has_old) {
		git_error_clear();
		rc = git_reference_create(&ref, rr, p->remote_ref, &local, 0,
		    "tend: push");
	}
	if (rc == GIT_EMODIFIED || rc == GIT_EEXISTS || rc == GIT_ELOCKED) {
		git_error_clear();
		o = MOVED; /* another pusher got there first */
	} else if (rc)
		fail(TEND_ERETRY, "update the remote's ref", p);
	else
		o = PUSHED;
out:
	git_reference_free(ref);
	git_revwalk_free(walk);
	git_packbuilder_free(pb);
	git_repository_free(rr);
	tend_buf_release(&dir);
	return o;
}

static enum outcome
push_once(git_repository *repo, git_remote *remote,
    const struct tend_git_push *p)
{
	struct push_ctx x = {.p = p, .remote = TEND_BUF_INIT};
	git_push_options po;
	struct tend_buf spec = TEND_BUF_INIT, why = TEND_BUF_INIT;
	char *specs[1];
	git_strarray refspecs = {specs, 1};
	enum outcome o;
	int rc;

	tend_buf_printf(&spec, "%s:%s", p->ref, p->remote_ref);
	specs[0] = spec.ptr;
	/* file://: libgit2 writes the remote's ref in this process, and a
	 * kill there leaves its lock, which the next push must clear */
	const char *url = git_remote_url(remote);
	if (url && strncmp(url, "file://", 7) == 0) {
		struct tend_buf lock = TEND_BUF_INIT;
		git_oid local;

		if (ref_id(repo, p->ref, &local)) {
			tend_buf_printf(&lock, "%s/%s.lock", url + 7,
			    p->remote_ref);
			tend_git_locks_note_file(lock.ptr, &local);
		}
		tend_buf_release(&lock);
	}
	if (url && (strncmp(url, "file://", 7) == 0 || url[0] == '/')) {
		tend_buf_release(&spec);
		return push_local(repo, url[0] == '/' ? url : url + 7, p);
	}
	git_push_options_init(&po, GIT_PUSH_OPTIONS_VERSION);
	callbacks(&po.callbacks, &x);
	git_error_clear();
	rc = git_remote_push(remote, &refspecs, &po);
	if (rc == GIT_ENONFASTFORWARD || (rc == 0 && x.refused &&
					     is_nonff(x.refused))) {
		git_error_clear();
		o = MOVED;
	} else if (rc == 0 && x.refused) {
		tend_buf_printf(&why, "push to %s failed: the remote refused %s: %s",
		    p->remote, p->remote_ref, x.refused);
		if (x.remote.len) {
			tend_buf_puts(&why, " (remote: ");
			remote_says(&why, &x.remote);
			tend_buf_putc(&why, ')');
		}
		tend_error_set(TEND_ECONFLICT, "%s", why.ptr);
		o = REFUSED;
	} else if (rc) {
		fail(TEND_ERETRY, NULL, p);
		o = UNREACHABLE;
	} else
		o = PUSHED;
	free(x.refused);
	tend_buf_release(&x.remote);
	tend_buf_release(&spec);
	tend_buf_release(&why);
	return o;
}

static int
fetch(git_remote *remote, const struct tend_git_push *p, const char *track)
{
	struct push_ctx x = {.p = p, .remote = TEND_BUF_INIT};
	git_fetch_options fo;
	struct tend_buf spec = TEND_BUF_INIT;
	char *specs[1];
	git_strarray refspecs = {specs, 1};
	int rc = 0;

	tend_buf_printf(&spec, "+%s:%s", p->remote_ref, track);
	specs[0] = spec.ptr;
	git_fetch_options_init(&fo, GIT_FETCH_OPTIONS_VERSION);
	callbacks(&fo.callbacks, &x);
	fo.update_fetchhead = 0;
	fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
	if (git_remote_fetch(remote, &refspecs, &fo, "tend: fetch to push"))
		rc = fail(TEND_ERETRY, "fetch", p);
	tend_buf_release(&x.remote);
	tend_buf_release(&spec);
	return rc;
}

int
tend_git_push_run(const struct tend_git_push *p, unsigned *merges)
{
	git_repository *repo = NULL;
	git_remote *remote = NULL;
	struct tend_buf track = TEND_BUF_INIT, tf = TEND_BUF_INIT;
	int rc = 0;

	*merges = 0;
	git_libgit2_init();
	if (git_repository_open_ext(&repo, p->repo,
		GIT_REPOSITORY_OPEN_NO_SEARCH, NULL)) {
		rc = fail(TEND_ERROR, "open the repository", p);
		goto out;
	}
	tend_git_push_tracking(&track, p->remote, p->remote_ref, p->app);
	if ((rc = open_remote(repo, p, &remote)))
		goto out;
	tend_git_writes_begin(p->state, p->locks, &tf);
	for (int attempt = 0;; attempt++) {
		git_oid local, seen;
		bool has_seen = ref_id(repo, track.ptr, &seen);

		if (!ref_id(repo, p->ref, &local))
			break; /* no commit: nothing to push */
		if (has_seen && (git_oid_equal(&local, &seen) ||
				    git_graph_descendant_of(repo, &seen,
					&local) == 1))
			break; /* the remote has it all */
		git_error_clear();
		if (attempt == PUSH_TRIES) {
			rc = tend_error_set(TEND_ECONFLICT,
			    "push to %s failed: %s kept moving (%d attempts)",
			    p->remote, p->remote_ref, PUSH_TRIES);
			break;
		}
		if (tend_failpoint("git-push", p->ref)) {
			rc = tend_error_set(TEND_ERETRY, "push to %s failed: %s",
			    p->remote, strerror(errno));
			break;
		}
		enum outcome o = push_once(repo, remote, p);
		if (o == REFUSED || o == UNREACHABLE) {
			rc = o == REFUSED ? TEND_ECONFLICT : TEND_ERETRY;
			break;
		}
		if (o == PUSHED) {
			git_reference *r = NULL;

			/* what the remote has now */
			tend_git_locks_note(repo, track.ptr, &local);
			if (git_reference_create(&r, repo, track.ptr, &local,
				1, "tend: push"))
				rc = fail(TEND_ERROR, "note what was pushed", p);
			git_reference_free(r);
			break;
		}
		/* it moved: fetch its tip, merge onto it, push again */
		if (attempt)
			backoff(attempt - 1);
		if ((rc = fetch(remote, p, track.ptr)))
			break;
		if (!ref_id(repo, track.ptr, &seen))
			continue; /* the ref went away on the remote */
		if (git_graph_descendant_of(repo, &seen, &local) == 1)
			continue; /* it has ours already */
		rc = merge_onto(repo, p, &local, &seen);
		if (rc == TEND_ECONFLICT) {
			tend_error_clear();
			rc = 0;
			continue; /* a pass moved the ref: again */
		}
		if (rc)
			break;
		++*merges;
	}
	tend_git_writes_end(&tf);
out:
	git_remote_free(remote);
	git_repository_free(repo);
	tend_buf_release(&track);
	return rc;
}
