/*
 * top.h - `tend top`: the dashboard's loop.
 */
#ifndef TEND_TUI_TOP_H
#define TEND_TUI_TOP_H

struct tend_top_opts {
	const char *state_dir;	/* the agent's socket is state_dir/agent.sock */
	const char *workspace;	/* shown in the header */
	/* `tend watch --tui`: the agent runs in this process; readable
	 * when it has stopped (-1 otherwise) */
	int agent_done_fd;
};

/*
 * Run the dashboard until the user quits (0) or the terminal goes away
 * (1). Return at once with a message on stderr: 2 when standard input or
 * output is not a terminal, 1 when no agent runs and none is starting
 * in-process.
 */
int tend_top_run(const struct tend_top_opts *o);

/* 0 when standard input and output are terminals; else a usage message
 * on stderr, as `cmd`, and 2. */
int tend_top_need_tty(const char *cmd);

#endif
