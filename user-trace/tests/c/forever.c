/* Writes and reads a file until killed; writes its pid to PIDFILE first.
 * Usage: forever PIDFILE DATA */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    FILE *p = fopen(argv[1], "w");
    fprintf(p, "%d\n", (int)getpid());
    fclose(p);
    int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
    char buf[64] = {0};
    for (unsigned long i = 0;; i++) {
        pwrite(fd, buf, sizeof buf, (i % 1024) * 64);
        pread(fd, buf, sizeof buf, (i % 1024) * 64);
    }
}
