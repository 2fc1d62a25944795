/* A timer signal handler that reads while the main loop reads: the handler's reads land
 * anywhere in the main loop's calls, including inside the preload library's bookkeeping.
 * Prints "handler N" (reads made by the handler) to the file given, with dprintf (which
 * writes through the C library's own write, not counted).
 * Usage: signals OUT */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static int hfd;
static volatile sig_atomic_t handler_reads;

static void on_alarm(int sig) {
    (void)sig;
    char c;
    int saved = 0;
    if (read(hfd, &c, 1) == 1) saved = 1;
    handler_reads++;
    (void)saved;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    hfd = open("/dev/zero", O_RDONLY);
    int fd = open("/dev/zero", O_RDONLY);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 20}, {0, 20}};
    setitimer(ITIMER_REAL, &it, NULL);
    char c;
    for (int i = 0; i < 300000; i++)
        if (read(fd, &c, 1) != 1) abort();
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    int out = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dprintf(out, "handler %d\n", (int)handler_reads);
    return 0;
}
