/* SPDX-License-Identifier: MIT */
/* The model's own randomness (not the backoff's): splitmix64. */

#include "sim-random.h"

static uint64_t sim_random(uint64_t *state) {
        uint64_t x = (*state += UINT64_C(0x9e3779b97f4a7c15));

        x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
        return x ^ (x >> 31);
}

double sim_random_double(uint64_t *state) {
        return (double) (sim_random(state) >> 11) * 0x1.0p-53;
}

usec_t sim_random_between(uint64_t *state, usec_t lo, usec_t hi) {
        if (hi <= lo)
                return lo;
        return lo + (usec_t) (sim_random_double(state) * (double) (hi - lo));
}
