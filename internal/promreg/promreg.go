// Package promreg registers Prometheus collectors on a registry the caller
// passes in (never the global default), reusing a collector a restarted
// component already registered on the same registry.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c with reg (when reg is not nil) and returns the
// collector to use: c, or the equal collector already registered.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}
