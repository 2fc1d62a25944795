/* A parent that vforks a child which execs this program again ("child" mode): the exec'd
 * image makes 7 stat calls, the parent 3 access calls after the child ends.
 * Usage: vfork FILE */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "child") == 0) {
        struct stat st;
        for (int i = 0; i < 7; i++) stat(argv[2], &st);
        return 0;
    }
    if (argc != 2) return 2;
    pid_t kid = vfork();
    if (kid == 0) {
        execl("/proc/self/exe", argv[0], "child", argv[1], (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(kid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    for (int i = 0; i < 3; i++) access(argv[1], F_OK);
    return 0;
}
