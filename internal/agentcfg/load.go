package agentcfg

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Parse decodes a config file over Default: file only, with no
// environment, no flags, no path resolution and no validation (Load does
// all of it). An unknown key, a second YAML document or a file over
// MaxFileBytes is an error matching ErrInvalid.
func Parse(yamlBytes []byte) (Config, error) {
	c := Default()
	if err := decode(&c, yamlBytes); err != nil {
		return Config{}, err
	}
	c.normalize()
	return c, nil
}

func decode(c *Config, b []byte) error {
	if len(b) > MaxFileBytes {
		return fmt.Errorf("agentcfg: config file of %d bytes, more than %d: %w", len(b), MaxFileBytes, ErrInvalid)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file: the defaults
		}
		var te *yaml.TypeError
		if errors.As(err, &te) {
			te.Errors = namePaths(b, te.Errors)
		}
		return fmt.Errorf("agentcfg: %w: %w", err, ErrInvalid)
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return fmt.Errorf("agentcfg: more than one YAML document: %w", ErrInvalid)
	}
	return nil
}

// namePaths adds the YAML path to the decoder's type errors, which name
// only a line ("line 7: cannot unmarshal ..."): the outermost key or list
// element on that line (on a line of flow style, "log: {level: [x]}", the
// culprit is within it).
func namePaths(b []byte, msgs []string) []string {
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil {
		return msgs
	}
	byLine := make(map[int][]string)
	var walk func(n *yaml.Node, path string, depth int)
	walk = func(n *yaml.Node, path string, depth int) {
		if depth > 8 { // deeper than any Config field
			return
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, k := range n.Content {
				walk(k, path, depth+1)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + p
				}
				byLine[k.Line] = append(byLine[k.Line], p)
				if v.Kind == yaml.ScalarNode && v.Line != k.Line {
					byLine[v.Line] = append(byLine[v.Line], p)
				}
				walk(v, p, depth+1)
			}
		case yaml.SequenceNode:
			for i, e := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				byLine[e.Line] = append(byLine[e.Line], p)
				walk(e, p, depth+1)
			}
		}
	}
	walk(&doc, "", 0)
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m
		var line int
		if _, err := fmt.Sscanf(m, "line %d:", &line); err != nil {
			continue
		}
		if ps := byLine[line]; len(ps) > 0 {
			prefix := fmt.Sprintf("line %d:", line)
			out[i] = prefix + " " + ps[0] + ":" + strings.TrimPrefix(m, prefix)
		}
	}
	return out
}

// Load builds the agent's configuration: Default, then the file at path
// (none if path is empty; refused over MaxFileBytes), then the FMNODE_
// variables of env ("KEY=value" entries, as os.Environ gives them), then
// the flags in args, each later source overriding the earlier. Relative
// paths from the file are resolved against its directory, those from env
// or args against the working directory. The result is validated (not
// checked: see Check).
//
// Every field is a flag named after its YAML path in kebab-case
// (bind.node_addr: --bind-node-addr) and an environment variable in upper
// snake case with EnvPrefix (FMNODE_BIND_NODE_ADDR). --retry-join repeats;
// FMNODE_RETRY_JOIN is comma-separated; either replaces the file's list.
// An unknown flag, a positional argument or an unknown FMNODE_ variable
// (other than EnvConfig) is an error naming it. -h and --help return an
// error matching flag.ErrHelp (see PrintFlags).
func Load(path string, args []string, env []string) (Config, error) {
	c := Default()
	if path != "" {
		b, err := readBounded(path)
		if err != nil {
			return Config{}, err
		}
		if err := decode(&c, b); err != nil {
			return Config{}, fmt.Errorf("%s: %w", path, err)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return Config{}, fmt.Errorf("agentcfg: %s: %w", path, err)
		}
		dir := filepath.Dir(abs)
		for _, p := range pathFields(&c) {
			if *p != "" && !filepath.IsAbs(*p) {
				*p = filepath.Join(dir, *p)
			}
		}
	}
	if err := applyEnv(&c, env); err != nil {
		return Config{}, err
	}
	if err := applyFlags(&c, args); err != nil {
		return Config{}, err
	}
	for _, p := range pathFields(&c) {
		if *p != "" && !filepath.IsAbs(*p) {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return Config{}, fmt.Errorf("agentcfg: %s: %w", *p, err)
			}
			*p = abs
		}
	}
	c.normalize()
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("agentcfg: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("agentcfg: %w", err)
	} else if st.IsDir() {
		return nil, fmt.Errorf("agentcfg: %s: is a directory: %w", path, ErrInvalid)
	} else if st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("agentcfg: %s: %d bytes, more than %d: %w", path, st.Size(), MaxFileBytes, ErrInvalid)
	}
	// The size can change after Stat, and a pipe has none: read one byte
	// past the bound to tell.
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("agentcfg: %s: %w", path, err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("agentcfg: %s: more than %d bytes: %w", path, MaxFileBytes, ErrInvalid)
	}
	return b, nil
}

// flagName is the flag of a YAML path: bind.node_addr is bind-node-addr.
func flagName(path string) string {
	return strings.NewReplacer(".", "-", "_", "-").Replace(path)
}

// envName is the environment variable of a YAML path: bind.node_addr is
// FMNODE_BIND_NODE_ADDR.
func envName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// setValue parses s into the field p points to. A list takes s as a
// comma-separated list, or appends s if appendOne.
func setValue(p any, s string, appendOne bool) error {
	switch p := p.(type) {
	case *string:
		*p = s
	case *bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%s: want true or false", show(s))
		}
		*p = b
	case *NodeID:
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			return fmt.Errorf("%s: want an integer in 1..65535", show(s))
		}
		*p = NodeID(n)
	case *time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%s: want a duration such as 30s", show(s))
		}
		*p = d
	case *float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%s: want a number such as 0.5", show(s))
		}
		*p = f
	case *[]string:
		if appendOne {
			if len(*p) >= MaxRetryJoin {
				return fmt.Errorf("more than %d entries", MaxRetryJoin)
			}
			*p = append(*p, s)
			return nil
		}
		*p = nil
		for _, e := range strings.Split(s, ",") {
			if e = strings.TrimSpace(e); e != "" {
				*p = append(*p, e)
			}
		}
	default:
		return fmt.Errorf("agentcfg: no parser for %T", p) // a bug: fields() has a new type
	}
	return nil
}

func applyEnv(c *Config, env []string) error {
	byName := make(map[string]field)
	for _, f := range fields() {
		byName[envName(f.path)] = f
	}
	var p problems
	for _, kv := range env {
		if !strings.HasPrefix(kv, EnvPrefix) {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			p = append(p, fmt.Errorf("agentcfg: environment: %s: no '=': %w", show(k), ErrInvalid))
			continue
		}
		if k == EnvConfig {
			continue
		}
		f, known := byName[k]
		if !known {
			p = append(p, fmt.Errorf("agentcfg: environment: unknown variable %s: %w", k, ErrInvalid))
			continue
		}
		if err := setValue(f.ptr(c), v, false); err != nil {
			p = append(p, fmt.Errorf("agentcfg: environment: %s (%s): %w: %w", k, f.path, err, ErrInvalid))
		}
	}
	return p.err()
}

// flagValue sets one field from a flag.
type flagValue struct {
	p        any
	list     bool // the first occurrence replaces the list, the next append
	replaced bool
}

func (v *flagValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	switch p := v.p.(type) {
	case *[]string:
		return strings.Join(*p, ",")
	case *time.Duration:
		return p.String()
	default:
		return fmt.Sprint(reflect.ValueOf(p).Elem())
	}
}

func (v *flagValue) Set(s string) error {
	if v.list && !v.replaced {
		*(v.p.(*[]string)) = nil
		v.replaced = true
	}
	return setValue(v.p, s, v.list)
}

func (v *flagValue) IsBoolFlag() bool {
	_, ok := v.p.(*bool)
	return ok
}

// flagSet is the agent's flags, setting the fields of c.
func flagSet(c *Config) *flag.FlagSet {
	fs := flag.NewFlagSet("fmnode agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, f := range fields() {
		p := f.ptr(c)
		_, list := p.(*[]string)
		fs.Var(&flagValue{p: p, list: list}, flagName(f.path), f.usage+" ("+f.path+", "+envName(f.path)+")")
	}
	return fs
}

func applyFlags(c *Config, args []string) error {
	fs := flagSet(c)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return fmt.Errorf("agentcfg: %w", err)
		}
		return fmt.Errorf("agentcfg: flags: %w: %w", err, ErrInvalid)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("agentcfg: flags: unexpected argument %s: %w", show(fs.Arg(0)), ErrInvalid)
	}
	return nil
}

// PrintFlags writes the flags Load accepts, with their defaults, to w
// (for -h).
func PrintFlags(w io.Writer) {
	c := Default()
	fs := flagSet(&c)
	fs.SetOutput(w)
	fs.VisitAll(func(f *flag.Flag) {
		if f.DefValue == "false" || f.DefValue == "0" {
			f.DefValue = "" // no "(default false)": the zero is no default
		}
	})
	fs.PrintDefaults()
}
