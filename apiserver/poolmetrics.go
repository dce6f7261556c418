package apiserver

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/codeport/codeport/internal/store"
)

// poolCollector reports the process's database connection pool at scrape time. Requests and
// fulfilment workers share the pool, so time spent waiting for a connection is the first place
// a saturated replica shows.
type poolCollector struct {
	db                                      *store.DB
	conns, max, acquires, waits, waitSecond *prometheus.Desc
	opened                                  *prometheus.Desc
}

func newPoolCollector(db *store.DB) *poolCollector {
	return &poolCollector{
		db: db,
		conns: prometheus.NewDesc("codeport_db_pool_connections",
			"Open database connections of this process, by state (acquired, idle, constructing).", []string{"state"}, nil),
		max: prometheus.NewDesc("codeport_db_pool_max_connections",
			"The pool's connection limit (--database-max-conns).", nil, nil),
		acquires: prometheus.NewDesc("codeport_db_pool_acquires_total",
			"Connections taken from the pool.", nil, nil),
		waits: prometheus.NewDesc("codeport_db_pool_empty_acquires_total",
			"Acquires that found no idle connection and waited for one to be released or opened.", nil, nil),
		waitSecond: prometheus.NewDesc("codeport_db_pool_empty_acquire_wait_seconds_total",
			"Time spent by those acquires waiting.", nil, nil),
		opened: prometheus.NewDesc("codeport_db_pool_opened_connections_total",
			"Connections opened to the database.", nil, nil),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.max, c.acquires, c.waits, c.waitSecond, c.opened} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.db.Pool.Stat()
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.ConstructingConns()), "constructing")
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(c.acquires, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.waitSecond, prometheus.CounterValue, s.EmptyAcquireWaitTime().Seconds())
	ch <- prometheus.MustNewConstMetric(c.opened, prometheus.CounterValue, float64(s.NewConnsCount()))
}
