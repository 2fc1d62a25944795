/* A trace that, replayed naively, acts outside the replay directory. Usage: escape SENTINEL,
 * run in a work directory beside SENTINEL, which holds victim/ (with gone and moveme) and
 * file. Each call acts on SENTINEL through a symbolic link the program makes: an absolute
 * link to a directory, an absolute link to a file, and a relative link whose ".." climbs out.
 * The traced run really changes SENTINEL; a replay must not. Also makes an absolute link to a
 * place inside the work directory, which a replay must recreate and may follow. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void ok(int cond, const char *what) {
    if (!cond) { perror(what); exit(1); }
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const char *s = argv[1];
    const char *name = strrchr(s, '/') ? strrchr(s, '/') + 1 : s;
    char p[4096], cwd[4096];
    ok(getcwd(cwd, sizeof cwd) != NULL, "getcwd");

    /* An absolute link to a directory outside, and a file created through it. */
    snprintf(p, sizeof p, "%s/victim", s);
    ok(symlink(p, "esc") == 0, "symlink esc");
    int fd = open("esc/owned", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    ok(fd >= 0 && write(fd, "owned\n", 6) == 6 && close(fd) == 0, "open esc/owned");

    /* An absolute link to a file outside: truncated and rewritten, then its mode changed. */
    snprintf(p, sizeof p, "%s/file", s);
    ok(symlink(p, "abs") == 0, "symlink abs");
    fd = open("abs", O_WRONLY | O_TRUNC);
    ok(fd >= 0 && write(fd, "pwned\n", 6) == 6 && close(fd) == 0, "open abs");
    ok(chmod("abs", 0777) == 0, "chmod abs");

    /* ".." through a link: up -> "..", the work directory's parent. */
    ok(symlink("..", "up") == 0, "symlink up");
    snprintf(p, sizeof p, "up/%s/dotdot", name);
    fd = open(p, O_CREAT | O_WRONLY, 0644);
    ok(fd >= 0 && close(fd) == 0, "open up/.../dotdot");

    /* Names removed, made and renamed across the directory link. */
    ok(unlink("esc/gone") == 0, "unlink esc/gone");
    ok(mkdir("esc/newdir", 0755) == 0, "mkdir esc/newdir");
    ok(rename("esc/moveme", "stolen") == 0, "rename esc/moveme");
    fd = creat("local", 0644);
    ok(fd >= 0 && close(fd) == 0, "creat local");
    ok(rename("local", "esc/planted") == 0, "rename local");

    /* An absolute link inside the work directory, followed to create its target. */
    snprintf(p, sizeof p, "%s/inside", cwd);
    ok(symlink(p, "good") == 0, "symlink good");
    fd = open("good", O_CREAT | O_WRONLY, 0644);
    ok(fd >= 0 && close(fd) == 0, "open good");
    return 0;
}
