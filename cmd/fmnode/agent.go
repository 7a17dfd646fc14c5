package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/fmnode/fmnode/internal/agent"
	"github.com/fmnode/fmnode/internal/agentcfg"
)

// version is the binary's version (set with -ldflags "-X main.version=...").
var version = "dev"

// runAgent is `fmnode agent`: the daemon. The config is the file named by
// --config (or FMNODE_CONFIG), then FMNODE_* variables, then flags.
// SIGTERM and SIGINT shut it down gracefully; SIGHUP reloads the log
// level and the TLS certificate from the same sources.
func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	path, print, rest, err := agentArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "fmnode agent: %v\n", err)
		return 2
	}
	env := os.Environ()
	cfg, err := agentcfg.Load(path, rest, env)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stderr, "usage: fmnode agent [--config FILE] [--print-config] [flags]\n\nEvery config field is a flag and an FMNODE_* variable; flags win:")
		agentcfg.PrintFlags(stderr)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "fmnode agent: %v\n", err)
		return 2
	}
	if print {
		b, err := cfg.YAML()
		if err != nil {
			fmt.Fprintf(stderr, "fmnode agent: %v\n", err)
			return 1
		}
		_, _ = stdout.Write(b)
		return 0
	}
	level := new(slog.LevelVar)
	_ = level.UnmarshalText([]byte(cfg.Log.Level))
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(stderr, hopts)
	if cfg.Log.Format == "json" {
		h = slog.NewJSONHandler(stderr, hopts)
	}
	log := slog.New(h)
	a, err := agent.New(cfg, agent.Options{Version: version, Logger: log, Level: level})
	if err != nil {
		log.Error("invalid configuration", "err", err)
		return 2
	}
	// The parent context (main's) ends on SIGINT and SIGTERM.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			select {
			case <-runCtx.Done():
				return
			case <-hup:
				reload(a, log, path, rest, env)
			}
		}
	}()
	if err := a.Run(runCtx); err != nil {
		log.Error("agent stopped", "err", err)
		return 1
	}
	return 0
}

// agentArgs takes --config and --print-config out of args; the rest are
// agentcfg's flags.
func agentArgs(args []string) (path string, print bool, rest []string, err error) {
	path = os.Getenv(agentcfg.EnvConfig)
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--print-config" || a == "-print-config":
			print = true
		case a == "--config" || a == "-config":
			if i+1 >= len(args) {
				return "", false, nil, errors.New("--config needs a file")
			}
			path = args[i+1]
			i++
		case strings.HasPrefix(a, "--config=") || strings.HasPrefix(a, "-config="):
			path = a[strings.Index(a, "=")+1:]
		default:
			rest = append(rest, a)
		}
	}
	return path, print, rest, nil
}

// reload is SIGHUP: load the config again from the same sources and apply
// what may change at run time.
func reload(a *agent.Agent, log *slog.Logger, path string, args, env []string) {
	next, err := agentcfg.Load(path, args, env)
	if err != nil {
		log.Error("reload: the new config is invalid; nothing changed", "err", err)
		return
	}
	applied, restart, err := a.Reload(next)
	if err != nil {
		log.Error("reload failed", "err", err, "applied", applied)
		return
	}
	log.Info("reloaded", "applied", applied, "needs_restart", restart)
}
