package apiserver

import "github.com/prometheus/client_golang/prometheus"

// cacheCollector reports each API's in-process caches at scrape time: how many key lookups the
// directory holds and how often change notifications dropped cache entries. A change to one
// partner should move the "entry" counters by one; a growing "all" counter means notifications
// are being missed or unreadable and every cache is being rebuilt from the database. Catalog
// snapshots are replaced rather than dropped: a change of some products should move the "patch"
// builds by one and leave the "rebuild" builds (a whole catalog loaded and encoded) alone.
type cacheCollector struct {
	servers       []*Server
	entries       *prometheus.Desc
	invalidations *prometheus.Desc
	builds        *prometheus.Desc
}

func newCacheCollector(servers []*Server) *cacheCollector {
	return &cacheCollector{
		servers: servers,
		entries: prometheus.NewDesc("codeport_key_cache_entries",
			"Key lookups (hits and misses) cached by the API, by environment.", []string{"environment"}, nil),
		invalidations: prometheus.NewDesc("codeport_cache_invalidations_total",
			"Change notifications that dropped or refreshed cache entries, by environment, cache (keys or "+
				"catalogs) and scope (entry: the changed partner, key or catalog; all: the whole cache).",
			[]string{"environment", "cache", "scope"}, nil),
		builds: prometheus.NewDesc("codeport_catalog_snapshot_builds_total",
			"Catalog snapshots made, by environment and kind (patch: from the changed products' rows; rebuild: "+
				"from the whole catalog, on first use, expiry or a change not limited to named products).",
			[]string{"environment", "kind"}, nil),
	}
}

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.entries
	ch <- c.invalidations
	ch <- c.builds
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.servers {
		env := s.cfg.Environment
		ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(s.keys.Len()), env)
		for cache, counts := range map[string]func() (uint64, uint64){
			"keys": s.keys.Invalidations, "catalogs": s.catalogs.Invalidations,
		} {
			targeted, flushes := counts()
			ch <- prometheus.MustNewConstMetric(c.invalidations, prometheus.CounterValue, float64(targeted), env, cache, "entry")
			ch <- prometheus.MustNewConstMetric(c.invalidations, prometheus.CounterValue, float64(flushes), env, cache, "all")
		}
		patches, rebuilds := s.catalogs.Builds()
		ch <- prometheus.MustNewConstMetric(c.builds, prometheus.CounterValue, float64(patches), env, "patch")
		ch <- prometheus.MustNewConstMetric(c.builds, prometheus.CounterValue, float64(rebuilds), env, "rebuild")
	}
}
