/* Writes its blocked-signal mask and the dispositions of SIGINT, SIGTERM, SIGHUP and SIGQUIT
 * to OUT ("mask M int D term D hup D quit D"; D: dfl, ign or handler), then, with a second
 * argument, sleeps until a signal ends it. Usage: sigstate OUT [wait] */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static const char *disp(int sig) {
    struct sigaction sa;
    sigaction(sig, NULL, &sa);
    return sa.sa_handler == SIG_DFL ? "dfl" : sa.sa_handler == SIG_IGN ? "ign" : "handler";
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    sigset_t set;
    sigprocmask(SIG_BLOCK, NULL, &set);
    unsigned long mask = 0;
    for (int s = 1; s < 64; s++)
        if (sigismember(&set, s)) mask |= 1UL << s;
    FILE *f = fopen(argv[1], "w");
    fprintf(f, "mask %lx int %s term %s hup %s quit %s\n", mask, disp(SIGINT), disp(SIGTERM),
            disp(SIGHUP), disp(SIGQUIT));
    fclose(f);
    if (argc > 2)
        for (;;) pause();
    return 0;
}
