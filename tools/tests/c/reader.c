/* Reads each file named on the command line to its end, with openat, read and close, in
 * 4 KiB reads: the workload of the layers test (its counts of C-library calls are exact). */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    char buf[4096];
    for (int i = 1; i < argc; i++) {
        int fd = openat(AT_FDCWD, argv[i], O_RDONLY);
        if (fd < 0) {
            perror(argv[i]);
            return 1;
        }
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0) {
        }
        if (n < 0 || close(fd) != 0) {
            perror(argv[i]);
            return 1;
        }
    }
    return 0;
}
