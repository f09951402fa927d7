/*
 * bench/latency.c - how long from a source write to the target entry
 * being visible, with a running agent: write SRC/lat (new content each
 * time), wait for the agent's rename into OUT (inotify IN_MOVED_TO), N
 * samples. Prints p50, p99 and max in ms. Not a test.
 *
 * Usage: bench-latency SRC_DIR OUT_DIR [N [GAP_MS]]
 * GAP_MS (default 0) waits between samples: with 0 a sample starts while
 * the agent may still be settling the previous one (its tracking
 * commits after the entry became visible), so both figures are useful.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: bench-latency SRC_DIR OUT_DIR [N]\n");
		return 2;
	}
	int n = argc > 3 ? atoi(argv[3]) : 1000;
	int gap = argc > 4 ? atoi(argv[4]) : 0;
	double *lat = calloc((size_t)n, sizeof *lat);
	int ino = inotify_init1(IN_CLOEXEC);
	char src[4096], buf[8192] __attribute__((aligned(8)));

	snprintf(src, sizeof src, "%s/lat", argv[1]);
	if (ino < 0 || inotify_add_watch(ino, argv[2], IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
		perror("inotify");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		char body[64];
		int len = snprintf(body, sizeof body, "run %d sample %d\n",
		    (int)getpid(), i);
		double t0 = now_ms();
		int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0 || write(fd, body, (size_t)len) != len) {
			perror(src);
			return 1;
		}
		close(fd);
		for (;;) {
			struct pollfd p = {.fd = ino, .events = POLLIN};

			if (poll(&p, 1, 5000) <= 0) {
				fprintf(stderr, "sample %d: no entry within 5 s\n", i);
				return 1;
			}
			ssize_t r = read(ino, buf, sizeof buf);
			bool seen = false;
			for (char *q = buf; q < buf + r;) {
				struct inotify_event *ev = (void *)q;

				if (ev->len && strcmp(ev->name, "lat") == 0)
					seen = true;
				q += sizeof *ev + ev->len;
			}
			if (seen)
				break;
		}
		lat[i] = now_ms() - t0;
		if (gap > 0)
			usleep((useconds_t)gap * 1000);
	}
	qsort(lat, (size_t)n, sizeof *lat, cmp);
	printf("%d samples%s: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", n,
	    gap > 0 ? " (spaced)" : "", lat[n / 2], lat[n * 99 / 100],
	    lat[n - 1]);
	free(lat);
	return 0;
}
