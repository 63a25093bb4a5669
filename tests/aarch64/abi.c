/* AAPCS64: the ninth and later integer arguments are passed on the stack. */
long sum10(long a, long b, long c, long d, long e, long f, long g, long h, long i, long j) {
    return a + b + c + d + e + f + g + h + i + j;
}

void store9(long a, long b, long c, long d, long e, long f, long g, long h, long *out) {
    (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; (void)h;
    out[0] = 9; out[1] = 8; out[2] = 7;
}
