package benchratio

import (
	"testing"
	"time"
)

// CopyRatio times b.N copies of body (the floor of any handler answering with it), then b.N
// runs of work, and reports work's time as a multiple of the copies' as the x-copy metric.
func CopyRatio(b *testing.B, body []byte, work func()) {
	b.Helper()
	buf := make([]byte, 0, len(body))
	start := time.Now()
	for range b.N {
		buf = append(buf[:0], body...)
	}
	copied := time.Since(start)
	b.ResetTimer()
	for range b.N {
		work()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed())/float64(max(copied, 1)), "x-copy")
}
