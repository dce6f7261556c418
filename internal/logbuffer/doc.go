// Package logbuffer batches a process's log lines into few writes. A serving process logs a
// line per request; writing each with its own system call costs more than encoding it, and
// the writer's lock, held across that call, queues every other request's line behind it.
//
// Lines are written within the flush interval, at once when the buffer fills, and on Close.
// Lines at or above a chosen level (warnings, errors) are written at once together with
// everything before them, so what explains a failure is out before the failure can end the
// process. A process killed without warning loses at most one interval of lines below that level.
package logbuffer
