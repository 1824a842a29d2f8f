/* SPDX-License-Identifier: MIT */
#pragma once

/* The model's own randomness (not the backoff's): a splitmix64 generator per agent, seeded from
 * the run's seed, so a run is a pure function of its options. */

#include <stdint.h>

#include "macro.h"

/* A uniform double in [0, 1). */
double sim_random_double(uint64_t *state);
/* A uniform duration in [lo, hi); lo when hi <= lo. */
usec_t sim_random_between(uint64_t *state, usec_t lo, usec_t hi);
