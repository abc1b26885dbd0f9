// Package operatormetrics is a compile-only stand-in for
// github.com/rhobs/operator-observability-toolkit/pkg/operatormetrics, which
// the Go module proxy refuses. It declares the names KubeVirt v1.9.0's
// monitoring packages use, backed by Prometheus' client library, so that
// KubeVirt's admitters compile. The admission binary registers and serves
// no metric; nothing here is exercised beyond package initialisation.
package operatormetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricOpts names and describes a metric.
type MetricOpts struct {
	Name        string
	Help        string
	ConstLabels map[string]string
	ExtraFields map[string]string
}

// MetricType is the kind of a metric.
type MetricType string

// The metric kinds KubeVirt names.
const (
	CounterType      MetricType = "Counter"
	GaugeType        MetricType = "Gauge"
	HistogramType    MetricType = "Histogram"
	SummaryType      MetricType = "Summary"
	CounterVecType   MetricType = "CounterVec"
	GaugeVecType     MetricType = "GaugeVec"
	HistogramVecType MetricType = "HistogramVec"
	SummaryVecType   MetricType = "SummaryVec"
)

// Metric is a metric with its options.
type Metric interface {
	GetOpts() MetricOpts
	GetType() MetricType
	GetBaseType() MetricType
	GetCollector() prometheus.Collector
}

type base struct {
	opts MetricOpts
	typ  MetricType
	col  prometheus.Collector
}

func (b base) GetOpts() MetricOpts                { return b.opts }
func (b base) GetType() MetricType                { return b.typ }
func (b base) GetBaseType() MetricType            { return b.typ }
func (b base) GetCollector() prometheus.Collector { return b.col }

func promOpts(o MetricOpts) prometheus.Opts {
	return prometheus.Opts{Name: o.Name, Help: o.Help, ConstLabels: o.ConstLabels}
}

// Counter is a counter metric.
type Counter struct {
	prometheus.Counter
	base
}

// NewCounter returns a counter.
func NewCounter(o MetricOpts) *Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts(promOpts(o)))
	return &Counter{Counter: c, base: base{o, CounterType, c}}
}

// CounterVec is a counter with labels.
type CounterVec struct {
	prometheus.CounterVec
	base
}

// NewCounterVec returns a counter with labels.
func NewCounterVec(o MetricOpts, labels []string) *CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts(promOpts(o)), labels)
	return &CounterVec{CounterVec: *c, base: base{o, CounterVecType, c}}
}

// Gauge is a gauge metric.
type Gauge struct {
	prometheus.Gauge
	base
}

// NewGauge returns a gauge.
func NewGauge(o MetricOpts) *Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts(promOpts(o)))
	return &Gauge{Gauge: g, base: base{o, GaugeType, g}}
}

// GaugeVec is a gauge with labels.
type GaugeVec struct {
	prometheus.GaugeVec
	base
}

// NewGaugeVec returns a gauge with labels.
func NewGaugeVec(o MetricOpts, labels []string) *GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts(promOpts(o)), labels)
	return &GaugeVec{GaugeVec: *g, base: base{o, GaugeVecType, g}}
}

// Histogram is a histogram metric.
type Histogram struct {
	prometheus.Histogram
	base
}

// NewHistogram returns a histogram.
func NewHistogram(o MetricOpts, h prometheus.HistogramOpts) *Histogram {
	h.Name, h.Help, h.ConstLabels = o.Name, o.Help, o.ConstLabels
	m := prometheus.NewHistogram(h)
	return &Histogram{Histogram: m, base: base{o, HistogramType, m}}
}

// HistogramVec is a histogram with labels.
type HistogramVec struct {
	prometheus.HistogramVec
	base
}

// NewHistogramVec returns a histogram with labels.
func NewHistogramVec(o MetricOpts, h prometheus.HistogramOpts, labels []string) *HistogramVec {
	h.Name, h.Help, h.ConstLabels = o.Name, o.Help, o.ConstLabels
	m := prometheus.NewHistogramVec(h, labels)
	return &HistogramVec{HistogramVec: *m, base: base{o, HistogramVecType, m}}
}

// CollectorResult is one sample a Collector reports.
type CollectorResult struct {
	Metric      Metric
	Labels      []string
	ConstLabels map[string]string
	Value       float64
	Timestamp   time.Time
}

// Collector reports samples on scrape.
type Collector struct {
	Metrics         []Metric
	CollectCallback func() []CollectorResult
}

var registered []Metric

// RegisterMetrics records the metrics; the stand-in exports none.
func RegisterMetrics(all ...[]Metric) error {
	for _, ms := range all {
		registered = append(registered, ms...)
	}
	return nil
}

// UnregisterMetrics forgets every metric.
func UnregisterMetrics(all ...[]Metric) error { return CleanRegistry() }

// RegisterCollector records the collectors' metrics.
func RegisterCollector(cs ...Collector) error {
	for _, c := range cs {
		registered = append(registered, c.Metrics...)
	}
	return nil
}

// ListMetrics returns the recorded metrics.
func ListMetrics() []Metric { return registered }

// CleanRegistry forgets every metric.
func CleanRegistry() error {
	registered = nil
	return nil
}
