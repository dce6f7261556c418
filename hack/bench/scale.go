package main

import (
	"context"
	"time"

	"github.com/codeport/codeport/internal/tenancy"
)

type scalePoint struct {
	products, partners int
	result
	ratio float64
	// orders is B3 against this point's partners (zero on the catalog-size axis); rss the
	// serve process's peak resident memory (MB) after the point's measurements.
	orders result
	rss    float64
}

// scaleCurve measures B1 (unfiltered list) with catalogs of 100, 1,000, 10,000 and 100,000
// products at 1,000 partners, and with 10, 1,000 and 10,000 partners at 1,000 products, where it
// also measures B3 (order placement, every partner funded, keys in rotation). Each point is a
// fresh database and serve process (workers off, as B3 runs); requests rotate over every
// partner's key, so the partner count is felt by key lookup, the per-partner limiter and the
// per-wallet locks.
func scaleCurve(ctx context.Context, cfg config, binary string, baseline float64) ([]scalePoint, error) {
	points := []struct {
		products, partners int
		orders             bool
	}{
		{100, 1000, false}, {1000, 1000, true}, {10000, 1000, false}, {100000, 1000, false},
		{1000, 10, true}, {1000, 10000, true},
	}
	out := make([]scalePoint, 0, len(points))
	for _, p := range points {
		progress("B6 %d products, %d partners", p.products, p.partners)
		point, err := measureScalePoint(ctx, cfg, binary, p.products, p.partners, p.orders)
		if err != nil {
			return nil, err
		}
		point.ratio = point.max / baseline
		out = append(out, point)
	}
	return out, nil
}

func measureScalePoint(
	ctx context.Context, cfg config, binary string, products, partners int, orders bool,
) (scalePoint, error) {
	funded := 0
	if orders {
		funded = partners
	}
	started := time.Now()
	t, err := newTenants(ctx, partners, products, funded)
	if err != nil {
		return scalePoint{}, err
	}
	defer t.close()
	progress("provisioned in %s", time.Since(started).Round(time.Millisecond))
	srv, err := startServe(binary, t.database.URL, string(tenancy.Production), "--workers=false")
	if err != nil {
		return scalePoint{}, err
	}
	defer srv.stop()
	point := scalePoint{products: products, partners: partners}
	point.result = measure(srv.base+"/catalog/products?take=20", t.keys, cfg.duration)
	if orders {
		if point.orders, err = placeOrders(srv.base, t.keys, cfg.clients, cfg.duration, "b6-"); err != nil {
			return scalePoint{}, err
		}
	}
	if point.rss, err = srv.peakRSS(); err != nil {
		return scalePoint{}, err
	}
	return point, nil
}
