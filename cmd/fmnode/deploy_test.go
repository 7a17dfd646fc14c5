package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/fmnode/fmnode/internal/agentcfg"
)

// k8sObject is the part of a manifest the test reads.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		ClusterIP                string `yaml:"clusterIP"`
		PublishNotReadyAddresses bool   `yaml:"publishNotReadyAddresses"`
		MaxUnavailable           int    `yaml:"maxUnavailable"`
		Selector                 struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Spec struct {
				Containers []struct {
					Args []string `yaml:"args"`
					Env  []struct {
						Name  string `yaml:"name"`
						Value string `yaml:"value"`
					} `yaml:"env"`
					LivenessProbe  probe `yaml:"livenessProbe"`
					ReadinessProbe probe `yaml:"readinessProbe"`
				} `yaml:"containers"`
				Volumes []struct {
					Name   string `yaml:"name"`
					Secret *struct {
						SecretName string `yaml:"secretName"`
					} `yaml:"secret"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type probe struct {
	HTTPGet struct {
		Path   string `yaml:"path"`
		Port   string `yaml:"port"`
		Scheme string `yaml:"scheme"`
	} `yaml:"httpGet"`
}

// TestKubernetesManifests: docs/deploy/kubernetes/fmnode.yaml has a
// StatefulSet and a PodDisruptionBudget per region, a headless Service
// publishing not-ready addresses, probes on /healthz and /readyz, the
// certificates from Secrets, and a config the agent accepts: the
// ConfigMap's file, the FMNODE_* variables and the flags of the
// container's command load and validate with agentcfg (so a field renamed
// in the config reference breaks this test).
func TestKubernetesManifests(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy", "kubernetes", "fmnode.yaml"))
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var objs []k8sObject
	for {
		var o k8sObject
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		objs = append(objs, o)
	}
	byKind := map[string][]k8sObject{}
	for _, o := range objs {
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}
	require.Len(t, byKind["Service"], 1)
	svc := byKind["Service"][0]
	require.Equal(t, "None", svc.Spec.ClusterIP, "the Service must be headless")
	require.True(t, svc.Spec.PublishNotReadyAddresses, "agents must find each other before any is ready")
	require.Len(t, byKind["StatefulSet"], 3, "one StatefulSet per region")
	require.Len(t, byKind["PodDisruptionBudget"], 3, "one PodDisruptionBudget per region")
	require.Len(t, byKind["ConfigMap"], 1)
	file := filepath.Join(t.TempDir(), "node.yaml")
	require.NoError(t, os.WriteFile(file, []byte(byKind["ConfigMap"][0].Data["node.yaml"]), 0o600))

	pdbs := map[string]bool{}
	for _, p := range byKind["PodDisruptionBudget"] {
		require.Equal(t, 1, p.Spec.MaxUnavailable, p.Metadata.Name)
		pdbs[p.Spec.Selector.MatchLabels["region"]] = true
	}
	flagRE := regexp.MustCompile(`--([a-z-]+) `)
	for _, ss := range byKind["StatefulSet"] {
		region := ss.Spec.Selector.MatchLabels["region"]
		require.True(t, pdbs[region], "no PodDisruptionBudget for region %s", region)
		c := ss.Spec.Template.Spec.Containers[0]
		require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path, ss.Metadata.Name)
		require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path, ss.Metadata.Name)
		require.Equal(t, "HTTPS", c.ReadinessProbe.HTTPGet.Scheme)
		secret := false
		for _, v := range ss.Spec.Template.Spec.Volumes {
			if v.Name == "certs" && v.Secret != nil && v.Secret.SecretName != "" {
				secret = true
			}
		}
		require.True(t, secret, "%s: certificates must come from a Secret", ss.Metadata.Name)

		// The agent's config as this pod would have it: shell
		// expansions replaced by values of the right shape.
		cmd := strings.Join(c.Args, " ") + " "
		var args []string
		for _, m := range flagRE.FindAllStringSubmatch(cmd, -1) {
			if m[1] == "config" {
				continue
			}
			args = append(args, "--"+m[1], podValue(m[1]))
		}
		env := []string{}
		for _, e := range c.Env {
			if strings.HasPrefix(e.Name, agentcfg.EnvPrefix) {
				v := e.Value
				if v == "" {
					v = podValue(strings.ToLower(strings.TrimPrefix(e.Name, agentcfg.EnvPrefix)))
				}
				env = append(env, e.Name+"="+v)
			}
		}
		cfg, err := agentcfg.Load(file, args, env)
		require.NoError(t, err, "%s: the agent would refuse its config", ss.Metadata.Name)
		require.Equal(t, region, cfg.Region)
		require.NotEmpty(t, cfg.TLS.CertFile)
	}
}

// podValue is a value of the right shape for a field the manifest fills
// from the pod (its name, ordinal, addresses, a Secret).
func podValue(field string) string {
	switch {
	case field == "name":
		return "fmnode-east-0"
	case field == "node-id":
		return "100"
	case strings.HasSuffix(field, "addr"):
		return "fmnode-east-0.fmnode:7400"
	case strings.HasPrefix(field, "tls-"):
		return "/etc/fmnode/certs/fmnode-east-0.crt"
	case field == "zone":
		return "east-a"
	case field == "gossip_key":
		return "AAAAAAAAAAAAAAAAAAAAAA=="
	}
	return "x"
}

// TestDockerfile: no image registry is reachable from CI, so the image
// itself cannot be built here; what can go wrong in it is checked
// instead. The build stage's own `go build` line, run as written, gives a
// static binary (no ELF interpreter: it must run on any base) that
// starts; the final stage exposes every port the Kubernetes manifests
// name and runs as a non-root user.
func TestDockerfile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	require.NoError(t, err)
	df := string(b)
	m := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0) go build (.*) -o /out/fmnode (\./cmd/fmnode)$`).FindStringSubmatch(df)
	require.NotNil(t, m, "the Dockerfile's build line is not `RUN CGO_ENABLED=0 go build ... -o /out/fmnode ./cmd/fmnode`")
	bin := filepath.Join(t.TempDir(), "fmnode")
	args := append([]string{"build"}, splitShellWords(t, m[2])...)
	cmd := exec.Command("go", append(args, "-o", bin, m[3])...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), m[1])
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	f, err := elf.Open(bin)
	require.NoError(t, err)
	for _, p := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "the binary is dynamically linked: it needs a libc the base image may not have")
	}
	require.NoError(t, f.Close())
	out, err = exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "CGO_ENABLED 0")

	exposed := map[string]bool{}
	for _, l := range regexp.MustCompile(`(?m)^EXPOSE (.*)$`).FindAllStringSubmatch(df, -1) {
		for _, p := range strings.Fields(l[1]) {
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			exposed[strings.ToLower(p)] = true
		}
	}
	k8s, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy", "kubernetes", "fmnode.yaml"))
	require.NoError(t, err)
	ports := regexp.MustCompile(`containerPort: (\d+)(?:, protocol: (\w+))?`).FindAllStringSubmatch(string(k8s), -1)
	require.NotEmpty(t, ports)
	for _, p := range ports {
		proto := "tcp"
		if p[2] != "" {
			proto = strings.ToLower(p[2])
		}
		require.True(t, exposed[p[1]+"/"+proto], "the manifests use port %s/%s, which the Dockerfile does not EXPOSE", p[1], proto)
	}
	require.Regexp(t, `(?m)^USER [a-z]`, df, "the agent must not run as root")
}

// splitShellWords splits the Dockerfile's arguments as sh would for the
// simple quoting it uses (double quotes, no escapes).
func splitShellWords(t *testing.T, s string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`"([^"]*)"|(\S+)`).FindAllStringSubmatch(s, -1) {
		if m[2] != "" {
			out = append(out, m[2])
		} else {
			out = append(out, m[1])
		}
	}
	require.NotEmpty(t, out)
	return out
}
