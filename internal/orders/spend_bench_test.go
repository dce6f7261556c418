package orders_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/auth"
)

// BenchmarkPlaceUnderDailyLimit places orders of partners under a daily spend limit, one with
// no orders yet today and others with 5,000 and 50,000 of them, taking turns, and reports each
// busy partner's placement time relative to the quiet one's in the same run (busy/quiet): a
// limit whose check sums the day's orders costs more with every order of the day.
func BenchmarkPlaceUnderDailyLimit(b *testing.B) {
	ctx := b.Context()
	f := newFixture(b)
	limited := partner{
		ordering: &v1alpha1.OrderingSpec{Limits: &v1alpha1.OrderLimits{DailySpend: map[string]int64{"EUR": 1 << 50}}},
		topUps:   []v1alpha1.TopUp{eur("t1", "1000000.00")},
	}
	quiet := f.onboard(b, "quiet", limited)
	sizes := []int{5_000, 50_000}
	busy := make([]*auth.Account, len(sizes))
	dayStart := time.Now().UTC().Truncate(24 * time.Hour)
	for i, n := range sizes {
		busy[i] = f.onboard(b, fmt.Sprint("busy-", n), limited)
		// The day's orders, spread over the day so far, as their placements would have written them.
		if _, err := f.db.Pool.Exec(ctx, `INSERT INTO orders (account_id, external_order_code, payload_hash, currency,
				total_price, total_quantity, debited_amount, status, estimated_ready_at, created_at)
			SELECT $1, 'seeded-' || i, '\x00', 'EUR', 2000, 1, 2000, 'completed', now(),
				$2::timestamptz + (now() - $2::timestamptz) * i / $3
			FROM generate_series(1, $3::int) i`, busy[i].ID, dayStart, n); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := f.db.Pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		b.Fatal(err)
	}
	placed := 0
	place := func(acct *auth.Account) time.Duration {
		placed++
		start := time.Now()
		if _, _, err := f.service.Place(ctx, acct, []byte(order(fmt.Sprint("bench-", placed), eurCredit, 1))); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	// Every account's first order of the day reads what later ones do not.
	place(quiet)
	for _, acct := range busy {
		place(acct)
	}
	var quietTime time.Duration
	busyTime := make([]time.Duration, len(sizes))
	b.ResetTimer()
	for b.Loop() {
		quietTime += place(quiet)
		for i, acct := range busy {
			busyTime[i] += place(acct)
		}
	}
	for i, n := range sizes {
		b.ReportMetric(float64(busyTime[i])/float64(quietTime), fmt.Sprintf("busy-%dk/quiet", n/1000))
	}
	b.ReportMetric(float64(quietTime.Microseconds())/float64(b.N), "quiet-µs/op")
}
