/*
 * view.h - drawing the model with ncurses (the only curses user).
 */
#ifndef TEND_TUI_VIEW_H
#define TEND_TUI_VIEW_H

#include "model.h"

#define TV_RESIZE 0x2000

void tv_init(void);
void tv_end(void);
/* Draw everything; clears m->dirty. */
void tv_draw(struct tm_model *m, double now);
/* The next key as a model key, TV_RESIZE, or -1 when none is waiting. */
int tv_key(void);

#endif
