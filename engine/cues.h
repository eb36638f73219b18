/* Cues: a stream's segments shaped into text ready to show (internal;
 * wk_stream_take_cues).
 *
 * A cue list covers the stream's time in order without overlap: text
 * that a caller can push as it is (with its separators, within the audio
 * fed, never before what came earlier, at least one time step long) and
 * gaps where no more text can come. The array is sized when the stream is
 * created for the takes of a caller that takes as it feeds; making cues
 * allocates only for a larger take (a whole file's segments taken at
 * once). */
#ifndef WK_CUES_H
#define WK_CUES_H

#include <stdbool.h>
#include <stdint.h>

#include "whisperknot.h"

typedef struct wk_cues wk_cues;

/* Cues for takes of up to max_segs segments (more: wk_cues_make grows
 * them). words: the segments are
 * live words (WK_GROUP_WORD), which text_lines puts on one line per
 * utterance; else every segment is a line of its own. The memory is
 * added to *own_bytes. NULL when out of memory. */
wk_cues *wk_cues_new (size_t max_segs, bool text_lines, bool words,
    uint64_t * own_bytes);
void wk_cues_free (wk_cues * c);

/* Cues start at sample from (0 after a reset of the stream). */
void wk_cues_reset (wk_cues * c, int64_t from);

/* The cues for n segments just taken, given the samples fed, the settled
 * point and whether the stream is finished; valid until the next call. */
size_t wk_cues_make (wk_cues * c, const wk_segment * segs, size_t n,
    int64_t fed, int64_t settled, bool finished, const wk_cue ** out);

#endif /* WK_CUES_H */
