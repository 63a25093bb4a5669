/* The two glibc 2.38 symbols bochscpu-python 0.4.0's manylinux_2_28 wheel imports (unversioned, from its C++
   build): Debian 12 has glibc 2.36. Loaded with RTLD_GLOBAL into the Bochs guest process before bochscpu, only
   where the C library lacks them (lowp.emulator.bochs). ISO C23 changed two things in these functions: strtoull
   with base 0 or 2 accepts a "0b" prefix, and scanf's %i does too (and %b exists); Bochs parses decimal and hex
   parameter strings, so the C23 strtoull is written out and sscanf forwards to vsscanf. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

unsigned long long __isoc23_strtoull(const char *s, char **end, int base) {
    const char *p = s;
    while (isspace((unsigned char)*p)) p++;
    int negative = *p == '-';
    if (*p == '+' || *p == '-') p++;
    if ((base == 0 || base == 2) && p[0] == '0' && (p[1] == 'b' || p[1] == 'B') && (p[2] == '0' || p[2] == '1')) {
        unsigned long long v = strtoull(p + 2, end, 2);
        return negative ? -v : v;
    }
    return strtoull(s, end, base);
}

int __isoc23_sscanf(const char *s, const char *format, ...) {
    va_list args;
    va_start(args, format);
    int n = vsscanf(s, format, args);
    va_end(args);
    return n;
}
