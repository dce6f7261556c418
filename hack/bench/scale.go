package main

import (
	"context"
	"time"

	"github.com/codeport/codeport/apiserver/store"
)

type scalePoint struct {
	products, partners int
	result
	ratio float64
}

// scaleCurve measures B1 (unfiltered list) with catalogs of 100, 1,000 and 10,000 products at
// 1,000 partners, and with 10, 1,000 and 10,000 partners at 1,000 products. Each point is a
// fresh database and serve process; requests rotate over every partner's key, so the partner
// count is felt by key lookup and the per-partner limiter.
func scaleCurve(ctx context.Context, cfg config, binary string, baseline float64) ([]scalePoint, error) {
	points := []struct{ products, partners int }{
		{100, 1000}, {1000, 1000}, {10000, 1000}, {1000, 10}, {1000, 10000},
	}
	out := make([]scalePoint, 0, len(points))
	for _, p := range points {
		progress("B6 %d products, %d partners", p.products, p.partners)
		started := time.Now()
		t, err := newTenants(ctx, p.partners, p.products, 0)
		if err != nil {
			return nil, err
		}
		progress("provisioned in %s", time.Since(started).Round(time.Millisecond))
		srv, err := startServe(binary, t.database.URL, store.EnvironmentProduction)
		if err != nil {
			t.close()
			return nil, err
		}
		res := measure(srv.base+"/catalog/products?take=20", t.keys, cfg.duration)
		srv.stop()
		t.close()
		out = append(out, scalePoint{products: p.products, partners: p.partners, result: res, ratio: res.max / baseline})
	}
	return out, nil
}
