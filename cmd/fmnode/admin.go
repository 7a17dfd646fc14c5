package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/fmnode/fmnode/internal/certs"
	"github.com/fmnode/fmnode/internal/dataapi"
)

// adminFlags are the flags every command that talks to an agent's API
// takes: where (--addr, several comma-separated, the first that answers
// is used; FMNODE_ADDR) and how (TLS files or --insecure).
type adminFlags struct {
	addrs    string
	caFile   string
	certFile string
	keyFile  string
	insecure bool
	// tokenFile holds the bearer token of agents run with
	// admin.token_file.
	tokenFile string
	output    string
	timeout   time.Duration
}

func (f *adminFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addrs, "addr", os.Getenv("FMNODE_ADDR"), "agent API address(es), host:port, comma-separated (FMNODE_ADDR)")
	fs.StringVar(&f.caFile, "ca-file", os.Getenv("FMNODE_CA_FILE"), "PEM of the cluster CA (FMNODE_CA_FILE)")
	fs.StringVar(&f.certFile, "cert-file", os.Getenv("FMNODE_CERT_FILE"), "PEM client certificate signed by the cluster CA (FMNODE_CERT_FILE)")
	fs.StringVar(&f.keyFile, "key-file", os.Getenv("FMNODE_KEY_FILE"), "PEM key of the client certificate (FMNODE_KEY_FILE)")
	fs.StringVar(&f.tokenFile, "token-file", os.Getenv("FMNODE_TOKEN_FILE"), "file holding the admin bearer token, for agents run with admin.token_file (FMNODE_TOKEN_FILE)")
	fs.BoolVar(&f.insecure, "insecure", os.Getenv("FMNODE_INSECURE") == "true", "talk plain HTTP to an agent run with --insecure")
	fs.StringVar(&f.output, "o", "table", "output: table or json")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "bound on the whole call")
}

// adminClient calls one agent's admin API, trying each address in turn.
type adminClient struct {
	addrs  []string
	scheme string
	token  string
	http   *http.Client
}

func (f *adminFlags) client() (*adminClient, error) {
	var addrs []string
	for _, a := range strings.Split(f.addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, errors.New("--addr: no agent address (or set FMNODE_ADDR)")
	}
	if f.output != "table" && f.output != "json" {
		return nil, fmt.Errorf("-o: %q is not table or json", f.output)
	}
	c := &adminClient{addrs: addrs, scheme: "https", http: &http.Client{Timeout: f.timeout}}
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		if c.token = strings.TrimSpace(string(b)); c.token == "" {
			return nil, fmt.Errorf("--token-file: %s is empty", f.tokenFile)
		}
	}
	if f.insecure {
		if f.caFile != "" || f.certFile != "" || f.keyFile != "" {
			return nil, errors.New("--insecure: set together with TLS files")
		}
		c.scheme = "http"
		return c, nil
	}
	if f.caFile == "" || f.certFile == "" || f.keyFile == "" {
		return nil, errors.New("--ca-file, --cert-file and --key-file are required (or --insecure for an agent run without TLS)")
	}
	tc, err := certs.ClientTLS(f.certFile, f.keyFile, f.caFile, "")
	if err != nil {
		return nil, fmt.Errorf("--cert-file/--key-file/--ca-file: %w", err)
	}
	c.http.Transport = &http.Transport{TLSClientConfig: tc}
	return c, nil
}

// apiError is an error response of an agent; a refused operator action
// carries its reasons and the partition's explanation.
type apiError struct {
	Status int
	dataapi.ErrorBody
	Reasons []string `json:"reasons"`
	Explain string   `json:"explain"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s (HTTP %d, %s)", e.ErrorBody.Error, e.Status, e.Code)
}

// call sends one request; it moves to the next address only when the
// agent could not be reached (an answer, even an error, is final).
func (c *adminClient) call(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	var errs []error
	for _, addr := range c.addrs {
		req, err := http.NewRequestWithContext(ctx, method, c.scheme+"://"+addr+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		_ = resp.Body.Close()
		if err != nil {
			return fmt.Errorf("%s: read the answer: %w", addr, err)
		}
		if resp.StatusCode >= 300 {
			ae := &apiError{Status: resp.StatusCode}
			if json.Unmarshal(b, ae) != nil || ae.Code == "" {
				ae.ErrorBody = dataapi.ErrorBody{Error: strings.TrimSpace(string(b)), Code: "http"}
			}
			return ae
		}
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				return fmt.Errorf("%s: decode the answer: %w", addr, err)
			}
		}
		return nil
	}
	return fmt.Errorf("no agent answered: %w", errors.Join(errs...))
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
