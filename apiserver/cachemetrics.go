package apiserver

import "github.com/prometheus/client_golang/prometheus"

// cacheCollector reports each API's in-process caches at scrape time: how many key lookups the
// directory holds and how often change notifications dropped cache entries. A change to one
// partner should move the "entry" counters by one; a growing "all" counter means notifications
// are being missed or unreadable and every cache is being rebuilt from the database.
type cacheCollector struct {
	servers       []*Server
	entries       *prometheus.Desc
	invalidations *prometheus.Desc
}

func newCacheCollector(servers []*Server) *cacheCollector {
	return &cacheCollector{
		servers: servers,
		entries: prometheus.NewDesc("codeport_key_cache_entries",
			"Key lookups (hits and misses) cached by the API, by environment.", []string{"environment"}, nil),
		invalidations: prometheus.NewDesc("codeport_cache_invalidations_total",
			"Cache entries dropped on change notifications, by environment, cache (keys or catalogs) and "+
				"scope (entry: the changed partner, key or catalog; all: the whole cache).",
			[]string{"environment", "cache", "scope"}, nil),
	}
}

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.entries
	ch <- c.invalidations
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
	}
}
