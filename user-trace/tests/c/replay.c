/* A small workload for replay tests, run in a directory holding in/a (10000 bytes), in/b (3000)
 * and in/sub/c (100): reads of files that existed before, a directory listing, two threads
 * ordered on one file, a fork child using an inherited descriptor, stdio, rename, unlink, a
 * failed open, and a write to standard output (not replayed). Relative paths only. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int written;
static char buf[8192];

static void *writer(void *arg) {
    (void)arg;
    int fd = open("out/shared", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, 8192) != 8192 || fsync(fd) != 0 || close(fd) != 0) abort();
    pthread_mutex_lock(&lock);
    written = 1;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void *reader(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    while (!written) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    int fd = open("out/shared", O_RDONLY);
    if (fd < 0 || read(fd, buf, 8192) != 8192 || read(fd, buf, 8192) != 0) abort();
    close(fd);
    return NULL;
}

int main(void) {
    int a = open("in/a", O_RDONLY);
    if (a < 0) abort();
    for (int i = 0; i < 4; i++) read(a, buf, 4096); /* 4096, 4096, 1808, 0 */
    struct stat st;
    if (stat("in/b", &st) != 0 || st.st_size != 3000) abort();
    int b = openat(AT_FDCWD, "in/b", O_RDONLY);
    if (pread(b, buf, 1000, 2500) != 500) abort();
    if (mkdir("out", 0755) != 0) abort();
    DIR *d = opendir("in");
    int entries = 0;
    while (readdir(d)) entries++;
    closedir(d);
    if (entries != 5) abort();

    pthread_t t1, t2;
    pthread_create(&t2, NULL, reader, NULL);
    pthread_create(&t1, NULL, writer, NULL);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);

    pid_t kid = fork();
    if (kid == 0) {
        if (pread(a, buf, 100, 0) != 100) _exit(1);
        int c = creat("out/child", 0644);
        if (c < 0 || write(c, buf, 10) != 10) _exit(1);
        close(c);
        _exit(0);
    }
    int status;
    waitpid(kid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) abort();
    if (stat("out/child", &st) != 0 || st.st_size != 10) abort();

    FILE *f = fopen("out/log", "w");
    for (int i = 0; i < 10; i++) fwrite(buf, 1, 100, f);
    fclose(f);
    f = fopen("out/log", "r");
    if (fread(buf, 1, 600, f) != 600 || fread(buf, 1, 600, f) != 400) abort();
    fclose(f);
    if (rename("out/log", "out/log2") != 0 || unlink("out/log2") != 0) abort();
    if (access("in/sub/c", R_OK) != 0) abort();
    int c = open("in/sub/c", O_RDONLY);
    if (lseek(c, 0, SEEK_END) != 100) abort();
    close(c);
    if (open("missing", O_RDONLY) != -1) abort();
    close(a);
    close(b);
    write(1, "done\n", 5);
    return 0;
}
