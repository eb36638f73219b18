/* Grouping of the live policy's committed words into phrases or
 * utterances (internal; wk_stream_params.group).
 *
 * The live policy commits one segment per word. A grouper sits between it
 * and wk_stream_take: words go in as they are committed, whole groups
 * come out once they are closed (by a pause between words for phrases,
 * by the utterance_end marker, by a flush or the finish), each with the
 * words' text joined as Whisper spaced it, their tokens and their span.
 * Markers pass through after the group they close. Everything is
 * allocated when the stream is created; adding never allocates. */
#ifndef WK_GROUP_H
#define WK_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "whisperknot.h"

typedef struct wk_group wk_group;

/* A grouper for group (WK_GROUP_PHRASE or WK_GROUP_UTTERANCE) holding up
 * to max_words words of max_bytes text between takes; its memory is
 * added to *own_bytes. NULL when out of memory. */
wk_group *wk_group_new (wk_group_by group, int max_words, size_t max_bytes,
    uint64_t * own_bytes);
void wk_group_free (wk_group * g);

/* Adds the segments the live policy completed (words and markers), in
 * order. Releases what the previous take handed out. */
void wk_group_add (wk_group * g, const wk_segment * segs, size_t n);

/* Closes the open group (a flush, the finish). */
void wk_group_close (wk_group * g);

/* The closed groups and markers since the previous take; valid until the
 * next wk_group_* call that adds. */
size_t wk_group_take (wk_group * g, const wk_segment ** segs);

/* The earliest start of the groups not taken yet (closed or open), or -1
 * when there are none. */
int64_t wk_group_pending_start (const wk_group * g);

void wk_group_reset (wk_group * g);

#endif /* WK_GROUP_H */
