/* Stream calls only: 2 fopen, 1 fdopen (of 1 open), 50 fwrite, 5 fputs, 1 fflush, 21 fread,
 * 1 fseek, 1 ftell, 3 fgets, 3 fclose. Fortified: one fread through __fread_chk and the
 * fgets through __fgets_chk. The stream buffers' own reads and writes are not counted.
 * Usage: stdio FILE */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile size_t items = 100; /* not constants: the fortified entry points are used */
static volatile int line = 64;

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    char buf[4096];
    for (int i = 0; i < 100; i++) buf[i] = 'a' + i % 26;
    FILE *f = fopen(argv[1], "w");
    if (!f) return 1;
    for (int i = 0; i < 50; i++) fwrite(buf, 1, 100, f);
    char text[16];
    snprintf(text, sizeof text, "line %d\n", argc); /* not a constant: fputs stays fputs */
    for (int i = 0; i < 5; i++) fputs(text, f);
    fflush(f);
    fclose(f);
    f = fopen(argv[1], "r");
    for (int i = 0; i < 19; i++) fread(buf, 1, 100, f);
    fread(buf, 1, items, f);
    fseek(f, 5000, SEEK_SET);
    if (ftell(f) != 5000) return 1;
    for (int i = 0; i < 3; i++) fgets(buf, line, f);
    fclose(f);
    int fd = open(argv[1], O_RDONLY);
    FILE *g = fdopen(fd, "r");
    fread(buf, 1, 10, g);
    fclose(g);
    return 0;
}
