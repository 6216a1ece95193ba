/* event_slot.h - room for a libevent struct event inside an allocation of
 * the proxy's own (event_assign), so an object and its events are one
 * allocation: the relay, the upstream's dial, a connection's head phase. */
#ifndef PX_EVENT_SLOT_H
#define PX_EVENT_SLOT_H

#include <stddef.h>

#include <event2/event.h>

/* libevent's struct event (its size is libevent's, known at run time),
 * rounded up so that what follows a slot stays aligned. */
#define PX_EVENT_SLOT \
    ((event_get_struct_event_size() + sizeof(max_align_t) - 1) / sizeof(max_align_t) * \
     sizeof(max_align_t))

#endif
