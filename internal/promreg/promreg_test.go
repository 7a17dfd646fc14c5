package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
)

func TestRegisterReusesExisting(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "x_total", Help: "x"}
	first := Register(reg, prometheus.NewCounter(opts))
	again := Register(reg, prometheus.NewCounter(opts))
	assert.Same(t, first, again, "a restarted component reuses the registered collector")
	c := prometheus.NewCounter(opts)
	assert.Same(t, c, Register(nil, c), "no registry: the collector is used as is")
}
