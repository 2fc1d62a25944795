/* A library whose constructor opens and closes /dev/null three times: loaded with
 * LD_PRELOAD after the preload library, it runs before the preload library's own constructor,
 * so its calls reach the hooks before the library has attached. */
#include <fcntl.h>
#include <unistd.h>

__attribute__((constructor)) static void early(void) {
    for (int i = 0; i < 3; i++) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd >= 0) close(fd);
    }
}
