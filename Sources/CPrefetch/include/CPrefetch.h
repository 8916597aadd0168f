#ifndef RELAY_CPREFETCH_H
#define RELAY_CPREFETCH_H

/// Asks the CPU to bring the cache line holding `address` into every cache level, for writing
/// (the first thing a delivery does to an object is usually a reference-count increment).
/// A hint only: it never faults, whatever `address` is.
static inline void relay_prefetch_for_write(const void *address) {
    __builtin_prefetch(address, 1, 3);
}

#endif
