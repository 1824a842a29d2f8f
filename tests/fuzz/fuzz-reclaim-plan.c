/* SPDX-License-Identifier: MIT */
/* reclaim's levels (pod annotations pinion.io/reclaim-high/-target reach plan_parse_level
 * unfiltered) and its plan over any sample: whatever the input, a step never asks for more
 * than the cache above min-file, never lowers a limit below anon + min(file, min-file) +
 * headroom, and never goes below target. Input: "HIGH\nTARGET\nmin_file step limit usage file". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;

        char *save = NULL;
        char *high_s = strtok_r(text, "\n", &save), *target_s = strtok_r(NULL, "\n", &save);
        char *nums = strtok_r(NULL, "", &save);
        struct reclaim_level high, target;
        const char *reason = NULL;
        uint64_t min_file = 0, step = 0, limit = 0, usage = 0, file = 0;

        if (!high_s || !target_s || plan_parse_level(high_s, &high, &reason) < 0 ||
            plan_parse_level(target_s, &target, &reason) < 0) {
                free(text);
                return 0;
        }
        if (nums)
                (void) sscanf(nums, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &min_file, &step, &limit,
                              &usage, &file);
        struct reclaim_bounds b;
        if (plan_bounds_resolve(&high, &target, min_file, step, limit, &b, &reason) >= 0) {
                if (file > usage)
                        file = usage;
                struct memcg_sample s = { .limit = limit, .usage = usage, .file = file, .anon = usage - file };
                for (int ep = 0; ep < 2; ep++) {
                        struct reclaim_step p;
                        plan_step(&b, &s, ep, &p);
                        if (!plan_verdict_to_string(p.verdict))
                                abort();
                        if (p.verdict != RECLAIM_STEP)
                                continue;
                        uint64_t keep = file < b.min_file ? file : b.min_file;
                        if (p.amount == 0 || p.amount > b.step || p.amount > file - keep ||
                            p.new_limit != usage - p.amount || p.new_limit < b.target ||
                            p.new_limit < s.anon || p.new_limit - s.anon < keep ||
                            p.new_limit - s.anon - keep < b.headroom)
                                abort();
                }
                /* The v1 throttle: none, or below the limit, never below the limit - min-file +
                 * headroom, and always under the backstop threshold; its value never below usage. */
                uint64_t level = plan_throttle_level(&b, MEMCG_V1), backstop = plan_backstop_level(&b);
                if (level != 0 && (level >= limit || (b.min_file >= b.headroom && b.min_file - b.headroom < limit && level < limit - (b.min_file - b.headroom)) ||
                                   backstop != level + 1))
                        abort();
                uint64_t v = plan_throttle_value(level, usage, b.headroom, 4096);
                if (v < level - level % 4096 || (usage >= level - level % 4096 && v < usage && v != UINT64_MAX))
                        abort();
        }
        free(text);
        return 0;
}
