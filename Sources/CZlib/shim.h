#ifndef RELAY_CZLIB_SHIM_H
#define RELAY_CZLIB_SHIM_H
#include <zlib.h>

// deflateInit2/inflateInit2 are macros, which Swift does not import.
static inline int relay_deflate_init(z_streamp stream, int level, int windowBits) {
    return deflateInit2(stream, level, Z_DEFLATED, windowBits, 8, Z_DEFAULT_STRATEGY);
}

static inline int relay_inflate_init(z_streamp stream, int windowBits) {
    return inflateInit2(stream, windowBits);
}
#endif
