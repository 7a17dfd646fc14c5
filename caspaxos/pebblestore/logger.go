package pebblestore

import (
	"context"
	"fmt"
	"log/slog"
)

// slogLogger routes pebble's logging through slog. Pebble logs routine
// events (flushes, compactions, WAL recycling) at its one "info" level to
// stderr by default; here they go to slog at Debug, so an operator running
// at Info sees nothing from pebble unless it is fatal.
type slogLogger struct{ log *slog.Logger }

// Infof logs at Debug (see slogLogger).
func (l slogLogger) Infof(format string, args ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug(fmt.Sprintf(format, args...))
	}
}

// Fatalf logs at Error and panics. Pebble calls it on states it cannot
// continue from; panicking (rather than os.Exit, pebble's default) leaves
// the decision to the process, and a panic in pebble's goroutines still
// stops it.
func (l slogLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error("pebble fatal", "msg", msg)
	panic("pebblestore: pebble fatal: " + msg)
}
