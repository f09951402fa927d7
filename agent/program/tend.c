/*
 * tend.c - the tend command: everything is in libtend's tend_main().
 */
#include "tend/plugin.h"

int
main(int argc, char **argv)
{
	return tend_main(argc, argv, NULL);
}
