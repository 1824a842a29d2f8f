/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "parse.h"
#include "plan.h"
#include "string-table.h"

int plan_parse_level(const char *v, void *ret, const char **reason) {
        struct reclaim_level l = {};
        if (v && strchr(v, '%')) {
                if (parse_percent(v, &l.percent) < 0 || l.percent == 0 || l.percent > 100) {
                        *reason = "expected a percentage of the limit (1%..100%) or a size (e.g. 900M)";
                        return -EINVAL;
                }
                l.is_percent = true;
        } else if (!v || parse_size(v, &l.bytes) < 0 || l.bytes == 0) {
                *reason = "expected a percentage of the limit (1%..100%) or a size (e.g. 900M)";
                return -EINVAL;
        }
        *(struct reclaim_level *) ret = l;
        return 0;
}

int plan_level_resolve(const struct reclaim_level *l, uint64_t limit, uint64_t *ret) {
        if (!l->is_percent) {
                *ret = l->bytes;
                return 0;
        }
        if (limit == UINT64_MAX)
                return -ERANGE;
        /* limit / 100 * percent, without overflow for any 64-bit limit */
        *ret = limit / 100 * l->percent + limit % 100 * l->percent / 100;
        return 0;
}

int plan_bounds_resolve(const struct reclaim_level *high, const struct reclaim_level *target,
                        uint64_t min_file, uint64_t step, uint64_t limit, struct reclaim_bounds *ret,
                        const char **ret_reason) {
        struct reclaim_bounds b = { .limit = limit, .min_file = min_file, .step = step };

        if (plan_level_resolve(high, limit, &b.high) < 0 || plan_level_resolve(target, limit, &b.target) < 0) {
                *ret_reason = "the cgroup has no memory limit: give high and target as sizes";
                return -ERANGE;
        }
        if (b.target >= b.high) {
                *ret_reason = "target is not below high";
                return -EINVAL;
        }
        if (limit != UINT64_MAX && b.high > limit) {
                *ret_reason = "high is above the cgroup's limit";
                return -EINVAL;
        }
        /* Room for anonymous memory to grow during the moment a v1 limit is lowered: 1/64 of
         * the limit (or of high), at least 1 MiB. */
        uint64_t base = limit != UINT64_MAX ? limit : b.high;
        b.headroom = MAX(base / 64, UINT64_C(1) << 20);
        if (b.step == 0)
                b.step = UINT64_MAX;
        *ret = b;
        return 0;
}

static uint64_t add_sat(uint64_t a, uint64_t b) {
        return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

void plan_step(const struct reclaim_bounds *b, const struct memcg_sample *s, bool in_episode,
               struct reclaim_step *ret) {
        struct reclaim_step st = {};
        uint64_t keep_file = MIN(s->file, b->min_file);
        uint64_t reclaimable = s->file - keep_file;

        st.floor = add_sat(add_sat(s->anon, keep_file), b->headroom);
        st.goal = MAX(b->target, st.floor);
        st.partial = st.goal > b->target;

        if (!in_episode && s->usage < b->high)
                st.verdict = RECLAIM_IDLE;
        else if (s->usage <= st.goal)
                st.verdict = st.goal >= b->high ? RECLAIM_UNREACHABLE : RECLAIM_DONE;
        else if (st.goal >= b->high || reclaimable == 0)
                /* Reclaiming would not get usage under high (or there is nothing to take):
                 * leave the workload alone rather than thrash what it needs. */
                st.verdict = RECLAIM_UNREACHABLE;
        else {
                uint64_t want = s->usage - st.goal;
                st.verdict = RECLAIM_STEP;
                st.amount = MIN(MIN(want, b->step), reclaimable);
                st.new_limit = s->usage - st.amount;
                st.last = st.amount == want;
        }
        *ret = st;
}

uint64_t plan_inflow_rate(uint64_t from, uint64_t to, uint64_t elapsed_us) {
        if (to <= from || elapsed_us == 0)
                return 0;
        double rate = (double) (to - from) * 1e6 / (double) elapsed_us;
        return rate >= (double) UINT64_MAX ? UINT64_MAX : (uint64_t) rate;
}

uint64_t plan_settle_delay(uint64_t high, uint64_t usage, uint64_t rate, uint64_t min_us, uint64_t max_us) {
        if (rate == 0 || usage >= high)
                return max_us;
        double quarter = (double) (high - usage) / (double) rate * 1e6 / 4;
        if (quarter >= (double) max_us)
                return max_us;
        return quarter <= (double) min_us ? min_us : (uint64_t) quarter;
}

bool plan_throttle_wanted(const struct reclaim_bounds *b, const struct memcg_sample *s, bool engaged) {
        uint64_t need = add_sat(add_sat(s->anon, b->min_file), b->headroom);
        return engaged ? need < b->high : add_sat(need, b->headroom) < b->high;
}

uint64_t plan_throttle_level(const struct reclaim_bounds *b, enum memcg_version v) {
        if (v != MEMCG_V1)
                return b->high;
        if (b->limit == UINT64_MAX || b->limit <= b->high)
                return 0;
        uint64_t halfway = b->high + (b->limit - b->high) / 2;
        /* Room for everything page cache reclaim cannot free: the limit minus min-file, and a
         * headroom for the kernel's own charges beside it (page tables, slab). */
        uint64_t keep = b->min_file > b->headroom ? b->min_file - b->headroom : 0;
        uint64_t level = MAX(halfway - 1, keep < b->limit ? b->limit - keep : 0);
        return level < b->limit ? level : 0;
}

uint64_t plan_backstop_level(const struct reclaim_bounds *b) {
        if (b->limit == UINT64_MAX || b->limit <= b->high)
                return 0;
        uint64_t level = plan_throttle_level(b, MEMCG_V1);
        return level > 0 ? level + 1 : b->high + (b->limit - b->high) / 2;
}

uint64_t plan_throttle_value(uint64_t level, uint64_t usage, uint64_t headroom, uint64_t page_size) {
        uint64_t value = plan_limit_as_kernel_keeps(level, page_size);
        if (usage < value)
                return value;
        /* Usage is past the level already: a cap below it would make the writer of the cap
         * (the agent, or systemd for it) reclaim the difference inside that write. */
        uint64_t v = add_sat(usage, headroom);
        if (page_size == 0 || v > UINT64_MAX - page_size)
                return v;
        return (v + page_size - 1) / page_size * page_size;
}

static const char *const plan_verdict_table[_RECLAIM_VERDICT_MAX] = {
        [RECLAIM_IDLE] = "idle",
        [RECLAIM_STEP] = "step",
        [RECLAIM_DONE] = "done",
        [RECLAIM_UNREACHABLE] = "unreachable",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(plan_verdict, enum reclaim_verdict);

uint64_t plan_limit_as_kernel_keeps(uint64_t written, uint64_t page_size) {
        if (page_size == 0 || written == UINT64_MAX)
                return written;
        return written - written % page_size;
}

bool plan_limit_is_ours(uint64_t current, uint64_t original, uint64_t written, uint64_t page_size) {
        if (current >= original)
                return false; /* nothing lowered in force */
        if (written == 0)
                return true;
        return current == plan_limit_as_kernel_keeps(written, page_size);
}

enum reclaim_leftover_action plan_leftover_action(int open_error, int read_error, uint64_t current,
                                                  uint64_t original, uint64_t written, uint64_t page_size) {
        if (open_error == -ENOENT)
                return LEFTOVER_FORGET; /* the cgroup is gone: nothing holds the lowered limit */
        if (open_error < 0 || read_error < 0 || original == 0)
                return LEFTOVER_KEEP;
        if (current >= original)
                return LEFTOVER_FORGET;
        return plan_limit_is_ours(current, original, written, page_size) ? LEFTOVER_RESTORE : LEFTOVER_NOT_OURS;
}

static const char *const plan_leftover_action_table[_LEFTOVER_ACTION_MAX] = {
        [LEFTOVER_RESTORE] = "restore",
        [LEFTOVER_FORGET] = "forget",
        [LEFTOVER_KEEP] = "keep",
        [LEFTOVER_NOT_OURS] = "not-ours",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(plan_leftover_action, enum reclaim_leftover_action);

bool plan_limit_is_new_original(bool lowered, uint64_t recorded, uint64_t current) {
        return !lowered && recorded != 0 && current != 0 && current != recorded;
}

bool plan_record_may_write(bool lowered, uint64_t recorded, uint64_t limit) {
        if (limit == 0)
                return false;
        return !lowered || recorded == 0 || limit >= recorded;
}

bool plan_step_error_is_transient(int error) {
        return error == -EBUSY || error == -EAGAIN;
}
