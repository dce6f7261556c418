package fulfilment

// LogsSuppressed counts River's log records left out as repeats.
func (w *Workers) LogsSuppressed() uint64 { return w.logs.Suppressed() }
