/* One call of each file-system entry point the preload library times (stdio aside: stdio.c),
 * each made directly by the program, so each counts once in the user layer. Built with
 * _FORTIFY_SOURCE=2, as Debian builds: read, pread, readlink and readlinkat go through their
 * __*_chk entry points. Exits 1 naming the first call that failed. Usage: every DIR */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

/* Not constants, so the fortified entry points are called: __read_chk, __pread_chk,
 * __readlink_chk, __readlinkat_chk and __open_2. */
static volatile size_t want = 64;
static volatile int dirflags = O_RDONLY | O_DIRECTORY;

static void ok(int cond, const char *what) {
    if (!cond) { perror(what); exit(1); }
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    ok(chdir(argv[1]) == 0, "chdir");
    char buf[64], name[64];
    struct stat st;
    struct statx stx;
    struct statfs sfs;
    struct iovec iov = { buf, 4 };

    int fd = open("f", O_RDWR | O_CREAT | O_TRUNC, 0644);
    ok(fd >= 0, "open");
    ok(write(fd, "0123456789abcdef", 16) == 16, "write");
    ok(pwrite(fd, "Z", 1, 16) == 1, "pwrite");
    ok(writev(fd, &iov, 1) == 4, "writev");
    ok(pwritev(fd, &iov, 1, 20) == 4, "pwritev");
    ok(pwritev2(fd, &iov, 1, 24, 0) == 4, "pwritev2");
    ok(lseek(fd, 0, SEEK_SET) == 0, "lseek");
    ok(read(fd, buf, want) == 28, "read");
    ok(pread(fd, buf, want, 1) == 27, "pread");
    ok(readv(fd, &iov, 1) == 0, "readv");
    ok(preadv(fd, &iov, 1, 0) == 4, "preadv");
    ok(preadv2(fd, &iov, 1, 0, 0) == 4, "preadv2");
    ok(fstat(fd, &st) == 0 && st.st_size == 28, "fstat");
    ok(ftruncate(fd, 32) == 0, "ftruncate");
    ok(fallocate(fd, 0, 0, 4096) == 0, "fallocate");
    ok(posix_fallocate(fd, 0, 8192) == 0, "posix_fallocate");
    ok(fsync(fd) == 0, "fsync");
    ok(fdatasync(fd) == 0, "fdatasync");
    ok(fchmod(fd, 0640) == 0, "fchmod");
    ok(fchown(fd, getuid(), getgid()) == 0, "fchown");
    ok(futimens(fd, NULL) == 0, "futimens");
    ok(fstatfs(fd, &sfs) == 0, "fstatfs");
    ok(fsetxattr(fd, "user.a", "1", 1, 0) == 0, "fsetxattr");
    ok(fgetxattr(fd, "user.a", buf, sizeof buf) == 1, "fgetxattr");
    ok(flistxattr(fd, buf, sizeof buf) > 0, "flistxattr");
    ok(fremovexattr(fd, "user.a") == 0, "fremovexattr");
    struct flock lk = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
    ok(fcntl(fd, F_SETLK, &lk) == 0, "fcntl");
    ok(flock(fd, LOCK_EX) == 0, "flock");
    int d1 = dup(fd);
    ok(d1 >= 0, "dup");
    ok(dup2(fd, d1) == d1, "dup2");
    ok(dup3(fd, d1, O_CLOEXEC) == d1, "dup3");
    ok(close(d1) == 0, "close");

    int g = creat("g", 0644);
    ok(g >= 0, "creat");
    ok(copy_file_range(fd, &(loff_t){0}, g, &(loff_t){0}, 8, 0) == 8, "copy_file_range");
    ok(sendfile(g, fd, &(off_t){0}, 8) == 8, "sendfile");
    ok(close(g) == 0, "close");
    int a = openat(AT_FDCWD, "g", O_RDONLY);
    ok(a >= 0, "openat");
    ok(close(a) == 0, "close");

    ok(stat("f", &st) == 0, "stat");
    ok(statx(AT_FDCWD, "f", 0, STATX_BASIC_STATS, &stx) == 0, "statx");
    ok(statfs(".", &sfs) == 0, "statfs");
    ok(access("f", R_OK) == 0, "access");
    ok(faccessat(AT_FDCWD, "f", R_OK, 0) == 0, "faccessat");
    ok(truncate("f", 16) == 0, "truncate");
    ok(chmod("f", 0644) == 0, "chmod");
    ok(fchmodat(AT_FDCWD, "f", 0600, 0) == 0, "fchmodat");
    ok(chown("f", getuid(), getgid()) == 0, "chown");
    ok(fchownat(AT_FDCWD, "f", getuid(), getgid(), 0) == 0, "fchownat");
    ok(utimensat(AT_FDCWD, "f", NULL, 0) == 0, "utimensat");
    ok(setxattr("f", "user.b", "2", 1, 0) == 0, "setxattr");
    ok(getxattr("f", "user.b", buf, sizeof buf) == 1, "getxattr");
    ok(listxattr("f", buf, sizeof buf) > 0, "listxattr");
    ok(removexattr("f", "user.b") == 0, "removexattr");

    ok(symlink("f", "s") == 0, "symlink");
    ok(symlinkat("f", AT_FDCWD, "s2") == 0, "symlinkat");
    ok(lstat("s", &st) == 0 && S_ISLNK(st.st_mode), "lstat");
    ok(fstatat(AT_FDCWD, "s", &st, AT_SYMLINK_NOFOLLOW) == 0, "fstatat");
    ok(readlink("s", name, want) == 1, "readlink");
    ok(readlinkat(AT_FDCWD, "s2", name, want) == 1, "readlinkat");
    ok(lchown("s", getuid(), getgid()) == 0, "lchown");
    ok(lsetxattr("f", "user.c", "3", 1, 0) == 0, "lsetxattr");
    ok(lgetxattr("f", "user.c", buf, sizeof buf) == 1, "lgetxattr");
    ok(llistxattr("f", buf, sizeof buf) > 0, "llistxattr");
    ok(lremovexattr("f", "user.c") == 0, "lremovexattr");
    ok(link("f", "h") == 0, "link");
    ok(linkat(AT_FDCWD, "f", AT_FDCWD, "h2", 0) == 0, "linkat");
    ok(rename("h", "h3") == 0, "rename");
    ok(renameat(AT_FDCWD, "h3", AT_FDCWD, "h4") == 0, "renameat");
    ok(renameat2(AT_FDCWD, "h4", AT_FDCWD, "h5", RENAME_NOREPLACE) == 0, "renameat2");
    ok(unlink("h5") == 0, "unlink");
    ok(unlinkat(AT_FDCWD, "h2", 0) == 0, "unlinkat");
    ok(remove("s2") == 0, "remove");

    ok(mkdir("d", 0755) == 0, "mkdir");
    ok(mkdirat(AT_FDCWD, "d/e", 0755) == 0, "mkdirat");
    DIR *dir = opendir("d");
    ok(dir != NULL, "opendir");
    int n = 0;
    while (readdir(dir) != NULL) n++;
    ok(n == 3, "readdir"); /* ., .., e and then the end: 4 calls */
    ok(closedir(dir) == 0, "closedir");
    int dfd = open("d", dirflags);
    ok(dfd >= 0, "open");
    ok(getdents64(dfd, buf, sizeof buf) >= 0, "getdents64");
    ok(fchdir(dfd) == 0, "fchdir");
    DIR *fdir = fdopendir(dfd);
    ok(fdir != NULL, "fdopendir");
    ok(closedir(fdir) == 0, "closedir");
    ok(rmdir("e") == 0, "rmdir");
    ok(close(fd) == 0, "close");
    return 0;
}
