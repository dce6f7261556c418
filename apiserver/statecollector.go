package apiserver

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/money"
	"github.com/codeport/codeport/internal/store"
)

// OrderMetrics count orders through their life.
type OrderMetrics struct {
	placed   *prometheus.CounterVec
	finished *prometheus.CounterVec
	duration *prometheus.HistogramVec
	codes    *prometheus.CounterVec
}

// NewOrderMetrics registers the order instruments on reg.
func NewOrderMetrics(reg prometheus.Registerer) *OrderMetrics {
	m := &OrderMetrics{
		placed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "codeport_orders_placed_total", Help: "Orders accepted (202), by environment.",
		}, []string{"environment"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "codeport_orders_finished_total", Help: "Orders reaching a terminal state, by environment and status.",
		}, []string{"environment", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "codeport_order_fulfilment_seconds", Help: "Time from placement to terminal state, by environment and status.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"environment", "status"}),
		codes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "codeport_codes_delivered_total",
			Help: "Codes taken from the production stock, by product, counted after the delivery committed.",
		}, []string{"product_code"}),
	}
	reg.MustRegister(m.placed, m.finished, m.duration, m.codes)
	return m
}

// CodesDelivered counts codes of a product taken from the stock (Fulfiller.OnDelivered).
func (m *OrderMetrics) CodesDelivered(productCode string, codes int) {
	m.codes.WithLabelValues(productCode).Add(float64(codes))
}

// Placed counts an accepted order.
func (m *OrderMetrics) Placed(environment string) { m.placed.WithLabelValues(environment).Inc() }

// Finished is a fulfilment hook counting terminal states. It observes inside the finishing
// transaction, so a rolled-back finish may count once too often; that is acceptable for a metric.
func (m *OrderMetrics) Finished(_ context.Context, _ store.Querier, finished []fulfilment.Finished) error {
	for _, f := range finished {
		m.finished.WithLabelValues(f.Environment, f.Status).Inc()
		m.duration.WithLabelValues(f.Environment, f.Status).Observe(time.Since(f.Order.CreatedAt).Seconds())
	}
	return nil
}

// StateCollector reads gauges from the database at scrape time: the job queue, the code stock
// and the wallets. Labels are bounded by queues, products and partner accounts.
type StateCollector struct {
	db  *store.DB
	log *slog.Logger

	queueDepth *prometheus.Desc
	queueAge   *prometheus.Desc
	stock      *prometheus.Desc
	balance    *prometheus.Desc
	low        *prometheus.Desc
}

// NewStateCollector reads from db.
func NewStateCollector(db *store.DB, log *slog.Logger) *StateCollector {
	return &StateCollector{db: db, log: log,
		queueDepth: prometheus.NewDesc("codeport_queue_jobs",
			"Jobs waiting to run, by queue.", []string{"queue"}, nil),
		queueAge: prometheus.NewDesc("codeport_queue_oldest_job_age_seconds",
			"Age of the oldest job waiting to run, by queue.", []string{"queue"}, nil),
		stock: prometheus.NewDesc("codeport_code_stock",
			"Undelivered production codes, by product.", []string{"product_code"}, nil),
		balance: prometheus.NewDesc("codeport_wallet_balance",
			"Wallet balance in major units.", []string{"partner", "environment", "currency"}, nil),
		low: prometheus.NewDesc("codeport_wallet_low_balance",
			"1 while the balance is below its threshold.", []string{"partner", "environment", "currency"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queueDepth, c.queueAge, c.stock, c.balance, c.low} {
		ch <- d
	}
}

// Collect implements prometheus.Collector; a failing query skips its gauges and is logged.
func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	state, err := store.ReadGauges(ctx, c.db.Pool)
	if err != nil {
		c.log.Warn("metrics: read state", slog.Any("err", err))
		return
	}
	for _, q := range state.Queues {
		ch <- prometheus.MustNewConstMetric(c.queueDepth, prometheus.GaugeValue, float64(q.Jobs), q.Queue)
		ch <- prometheus.MustNewConstMetric(c.queueAge, prometheus.GaugeValue, q.OldestAgeSeconds, q.Queue)
	}
	for _, s := range state.Stock {
		ch <- prometheus.MustNewConstMetric(c.stock, prometheus.GaugeValue, float64(s.Codes), s.ProductCode)
	}
	for _, b := range state.Balances {
		scale, err := money.Scale(b.Currency)
		if err != nil {
			continue
		}
		low := 0.0
		if b.LowBalance {
			low = 1
		}
		ch <- prometheus.MustNewConstMetric(c.balance, prometheus.GaugeValue, float64(b.Balance)/float64(scale),
			b.Partner, b.Environment, b.Currency)
		ch <- prometheus.MustNewConstMetric(c.low, prometheus.GaugeValue, low, b.Partner, b.Environment, b.Currency)
	}
}
