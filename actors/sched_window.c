/* sched_window.c — the window state machine (sched_window.h). The transition
 * table below is the whole lifecycle; sched_window_step is the only writer of
 * a window's state.
 *
 *   state       event        next        what the caller does
 *   CLOSED      PREPARE      OPEN        entries placed; the token is handed out
 *   OPEN        CANCEL       CLOSED      the prepare failed after opening: released
 *   OPEN        COMPLETE     COMPLETING  the token matched: entries are concluded
 *   COMPLETING  DONE         CLOSED      every entry concluded, the reply is sent
 *   COMPLETING  HANDOFF      CLOSED      entries moved to a tier confirmation
 *                                        (sched_put_op_t), which replies later
 *   OPEN        LAPSE        CLOSED      lease over: released, the token recorded
 *   OPEN        END          CLOSED      request_end: released (the safety net)
 *   OPEN        TIER_RESET   OPEN        entries of the reset tier are stale (by
 *                                        generation) and fail at complete
 *   OPEN        COPY         COPYING     prefetch: copies handed to the migrator;
 *                                        no lapse, no complete until they end
 *   COPYING     COPIED       OPEN        the last copy ended: the caller is told
 *                                        which keys were copied
 *   COPYING     END          ABANDONED   request_end mid-copy: the request's name is
 *                                        free, its entries held until the copy ends
 *   ABANDONED   COPIED       CLOSED      the copy ended: released
 *
 * Anything else (a complete of a closed window, a second prepare, a lapse while
 * completing) is refused: -1, nothing changes. */
#include "sched_window.h"

typedef struct {
    sched_win_state_t from;
    sched_win_event_t ev;
    sched_win_state_t to;
} s_transition_t;

static const s_transition_t s_table[] = {
    {SCHED_WIN_CLOSED, SCHED_WEV_PREPARE, SCHED_WIN_OPEN},
    {SCHED_WIN_OPEN, SCHED_WEV_CANCEL, SCHED_WIN_CLOSED},
    {SCHED_WIN_OPEN, SCHED_WEV_COMPLETE, SCHED_WIN_COMPLETING},
    {SCHED_WIN_COMPLETING, SCHED_WEV_DONE, SCHED_WIN_CLOSED},
    {SCHED_WIN_COMPLETING, SCHED_WEV_HANDOFF, SCHED_WIN_CLOSED},
    {SCHED_WIN_OPEN, SCHED_WEV_LAPSE, SCHED_WIN_CLOSED},
    {SCHED_WIN_OPEN, SCHED_WEV_END, SCHED_WIN_CLOSED},
    {SCHED_WIN_OPEN, SCHED_WEV_TIER_RESET, SCHED_WIN_OPEN},
    {SCHED_WIN_OPEN, SCHED_WEV_COPY, SCHED_WIN_COPYING},
    {SCHED_WIN_COPYING, SCHED_WEV_COPIED, SCHED_WIN_OPEN},
    {SCHED_WIN_COPYING, SCHED_WEV_END, SCHED_WIN_ABANDONED},
    {SCHED_WIN_ABANDONED, SCHED_WEV_COPIED, SCHED_WIN_CLOSED},
};

void sched_window_init(sched_window_t *w)
{
    *w = (sched_window_t){.state = SCHED_WIN_CLOSED,
                          .entries = {.head = UINT32_MAX, .tail = UINT32_MAX}};
}

int sched_window_step(sched_window_t *w, sched_win_event_t ev, uint64_t token_id, uint64_t job_id,
                      int64_t now_ms)
{
    for (unsigned i = 0; i < sizeof s_table / sizeof s_table[0]; i++) {
        if (s_table[i].from != w->state || s_table[i].ev != ev)
            continue;
        w->state = s_table[i].to;
        if (ev == SCHED_WEV_PREPARE) {
            w->token_id = token_id;
            w->job_id = job_id;
            w->opened_ms = now_ms;
            w->stale = 0;
        } else if (ev == SCHED_WEV_LAPSE) {
            w->lapsed_token_id = w->token_id;
        } else if (ev == SCHED_WEV_TIER_RESET) {
            w->stale++;
        }
        return 0;
    }
    return -1;
}

const char *sched_window_state_name(sched_win_state_t s)
{
    static const char *const names[SCHED_WIN_STATES] = {"closed", "open", "completing", "copying",
                                                        "abandoned"};
    return (unsigned)s < SCHED_WIN_STATES ? names[s] : "?";
}

const char *sched_window_event_name(sched_win_event_t ev)
{
    static const char *const names[SCHED_WEV_COUNT] = {
        "prepare", "cancel", "complete",   "done", "handoff",
        "lapse",   "end",    "tier-reset", "copy", "copied"};
    return (unsigned)ev < SCHED_WEV_COUNT ? names[ev] : "?";
}
