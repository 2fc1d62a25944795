/* Known numbers of calls from 4 threads and 2 fork children that end with _exit:
 * 103 openat, 250 pread, 100 pwrite, 103 close, 3 fsync, 10 rename (and nothing else).
 * Built with _FORTIFY_SOURCE=2, so pread goes through __pread_chk and the children's
 * three-argument openat through __openat_2. Usage: exact DIR */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *dir;
/* Not constants, so the fortified entry points are called: __openat_2 and __pread_chk. */
static volatile int rdonly = O_RDONLY;
static volatile size_t want = 512;

static void work(const char *tag, int opens, int preads) {
    char path[4096], buf[512];
    for (int i = 0; i < opens; i++) {
        snprintf(path, sizeof path, "%s/%s-%d", dir, tag, i);
        int fd = openat(AT_FDCWD, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) { perror(path); abort(); }
        if (pwrite(fd, "0123456789abcdef", 16, 0) != 16) abort();
        if (close(fd) != 0) abort();
    }
    snprintf(path, sizeof path, "%s/%s-0", dir, tag);
    int fd = openat(AT_FDCWD, path, rdonly);
    if (fd < 0) abort();
    for (int i = 0; i < preads; i++)
        if (pread(fd, buf, want, i % 16) < 0) abort();
    close(fd);
}

static void *thread(void *arg) {
    char tag[32];
    snprintf(tag, sizeof tag, "t%ld", (long)arg);
    work(tag, 19, 50); /* 20 openat, 19 pwrite, 20 close, 50 pread */
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    dir = argv[1];
    char a[4096], b[4096];
    /* main: 3 openat, 6 pwrite, 3 fsync, 3 close, 10 rename */
    int fds[3];
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s/m%d", dir, i);
        fds[i] = openat(AT_FDCWD, a, O_WRONLY | O_CREAT, 0644);
        if (fds[i] < 0) abort();
        if (pwrite(fds[i], "x", 1, 0) != 1 || pwrite(fds[i], "y", 1, 1) != 1) abort();
    }
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, thread, (void *)i);
    /* Fork while the threads run: each child must count in its own slot. */
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            char tag[32];
            snprintf(tag, sizeof tag, "c%d", k);
            work(tag, 9, 25);
            _exit(0);
        }
    }
    for (int i = 0; i < 3; i++) { fsync(fds[i]); close(fds[i]); }
    /* A chain: m0 -> r0 -> r1 -> ... -> r9. */
    for (int i = 0; i < 10; i++) {
        if (i == 0) snprintf(a, sizeof a, "%s/m0", dir);
        else snprintf(a, sizeof a, "%s/r%d", dir, i - 1);
        snprintf(b, sizeof b, "%s/r%d", dir, i);
        if (rename(a, b) != 0) abort();
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int k = 0; k < 2; k++) {
        int st;
        waitpid(kids[k], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
    }
    return 0;
}
