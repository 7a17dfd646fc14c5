package agentcfg

import (
	"reflect"
	"slices"
)

// Reloadable compares c, the running config, with next, a reloaded one
// (SIGHUP), field by field. changed are the fields that differ and can be
// applied at run time: log.level, log.format, admin.token_file, and the TLS files (a
// certificate rotation) if TLS is on in both; refused are the other fields
// that differ, which take a restart. Both are YAML paths in YAML order;
// they are disjoint.
func (c Config) Reloadable(next Config) (changed []string, refused []string) {
	tlsBoth := c.TLSEnabled() && next.TLSEnabled()
	for _, f := range fields() {
		if equalField(f.ptr(&c), f.ptr(&next)) {
			continue
		}
		switch f.path {
		case "log.level", "log.format", "admin.token_file":
			changed = append(changed, f.path)
		case "tls.cert_file", "tls.key_file", "tls.ca_file":
			if tlsBoth {
				changed = append(changed, f.path)
			} else {
				// Turning TLS on or off is not a rotation.
				refused = append(refused, f.path)
			}
		default:
			refused = append(refused, f.path)
		}
	}
	return changed, refused
}

func equalField(a, b any) bool {
	if a, ok := a.(*[]string); ok {
		return slices.Equal(*a, *(b.(*[]string))) // nil and empty alike
	}
	return reflect.DeepEqual(a, b)
}
