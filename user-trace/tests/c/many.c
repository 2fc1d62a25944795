/* A workload of many calls for the streamed replay test: 3 threads each make, write, stat and
 * remove 2,500 files in one shared directory (so that their calls are ordered on it), and then
 * the main thread lists it. Relative paths only; argv[1] is the number of files per thread. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int files = 2500;

static void *work(void *arg) {
    long id = (long)arg;
    char name[64], buf[100] = {0};
    for (int i = 0; i < files; i++) {
        snprintf(name, sizeof name, "d/t%ld-%d", id, i);
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0 || write(fd, buf, sizeof buf) != sizeof buf || close(fd) != 0) abort();
        struct stat st;
        if (stat(name, &st) != 0 || st.st_size != sizeof buf) abort();
        if (unlink(name) != 0) abort();
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) files = atoi(argv[1]);
    if (mkdir("d", 0755) != 0) abort();
    pthread_t t[3];
    for (long i = 0; i < 3; i++) pthread_create(&t[i], NULL, work, (void *)i);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    if (rmdir("d") != 0) abort();
    return 0;
}
