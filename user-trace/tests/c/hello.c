/* A trivial program, built statically by the static-program test. */
#include <stdio.h>
int main(void) { puts("hello"); return 0; }
