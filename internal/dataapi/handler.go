package dataapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/partition"
)

// PathPrefix is the path of the key space: PUT, GET, DELETE PathPrefix+key
// with the key path-escaped.
const PathPrefix = "/v1/kv/"

// KeyPath returns the request path of key: PathPrefix and the key
// path-escaped (a '/' in the key becomes %2F).
func KeyPath(key []byte) string { return PathPrefix + url.PathEscape(string(key)) }

// Error codes: the stable "code" of an error body (see the package doc).
const (
	CodeRedirect         = "redirect"
	CodeBackpressure     = "backpressure"
	CodeLeaseExpired     = "lease_expired"
	CodeNotReady         = "not_ready"
	CodeStale            = "stale"
	CodeStalenessBound   = "staleness_bound"
	CodeUnavailable      = "unavailable"
	CodeOverloaded       = "overloaded"
	CodeUnknownOutcome   = "unknown_outcome"
	CodeTimeout          = "timeout"
	CodeCanceled         = "canceled"
	CodeTooLarge         = "too_large"
	CodeBadHeader        = "bad_header"
	CodeBadPath          = "bad_path"
	CodeBadBody          = "bad_body"
	CodeBadRequest       = "bad_request"
	CodeNotFound         = "not_found"
	CodeUnknownPartition = "unknown_partition"
	CodeNoRoute          = "no_route"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeInternal         = "internal"
	CodeConditionFailed  = "condition_failed"
)

// maxErrorText bounds the error text of an error body.
const maxErrorText = 1 << 10

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Handler is the data API of one agent: an http.Handler serving
// PathPrefix (see the package doc). Safe for concurrent use.
type Handler struct {
	cfg        Config
	log        *slog.Logger
	m          *metrics
	sem        chan struct{}
	retryAfter string
}

// New validates cfg and returns the handler.
func New(cfg Config) (*Handler, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	secs := max(int64((c.RetryAfter+time.Second-1)/time.Second), 1)
	return &Handler{cfg: c, log: c.Logger, m: newMetrics(c.Registerer), sem: make(chan struct{}, c.MaxInFlight),
		retryAfter: strconv.FormatInt(secs, 10)}, nil
}

// apiError is an error response.
type apiError struct {
	status int
	code   string
	msg    string
	retry  bool // send Retry-After
}

func errf(status int, code string, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var status int
	select {
	case h.sem <- struct{}{}:
		h.m.inFlight.Inc()
		status = h.serve(w, r)
		h.m.inFlight.Dec()
		<-h.sem
	default:
		status = h.fail(w, r, &apiError{status: http.StatusServiceUnavailable, code: CodeOverloaded, retry: true,
			msg: fmt.Sprintf("dataapi: %d requests in flight", h.cfg.MaxInFlight)})
	}
	h.m.done(r.Method, status, time.Since(start).Seconds())
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) int {
	esc, ok := strings.CutPrefix(r.URL.EscapedPath(), PathPrefix)
	if !ok {
		return h.fail(w, r, errf(http.StatusNotFound, CodeNoRoute, "dataapi: no endpoint %.*q (want %s<key>)", 64, r.URL.Path, PathPrefix))
	}
	write := false
	switch r.Method {
	case http.MethodGet:
	case http.MethodPut, http.MethodDelete:
		write = true
	default:
		w.Header().Set("Allow", "GET, PUT, DELETE")
		return h.fail(w, r, errf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "dataapi: method %.*q (GET, PUT, DELETE)", 16, r.Method))
	}
	key, ae := parseKey(esc, h.cfg.MaxKeyBytes)
	if ae != nil {
		return h.fail(w, r, ae)
	}
	p := h.cfg.Partitioner.Partition(key)
	w.Header().Set(HeaderPartition, p.String())
	rh, err := ParseRequestHeaders(r.Header)
	if err != nil {
		return h.fail(w, r, errf(http.StatusBadRequest, CodeBadHeader, "dataapi: %v", err))
	}
	if rh.If != nil && !write {
		return h.fail(w, r, errf(http.StatusBadRequest, CodeBadHeader, "dataapi: %s and %s are for PUT and DELETE", HeaderIfMatch, HeaderIfNoneMatch))
	}
	if rh.PollWait > 0 && !write {
		return h.fail(w, r, errf(http.StatusBadRequest, CodeBadHeader, "dataapi: %s is for PUT and DELETE", HeaderPollWait))
	}
	var value []byte
	if r.Method == http.MethodPut {
		if value, ae = h.readBody(w, r, len(key)); ae != nil {
			return h.fail(w, r, ae)
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
	defer cancel()
	var reply partition.Reply
	if write {
		reply, err = h.cfg.Backend.Write(ctx, partition.WriteRequest{Partition: p, Epoch: rh.Epoch, Key: key, Value: value,
			Delete: r.Method == http.MethodDelete, If: rh.If, PollWait: rh.PollWait})
	} else {
		reply, err = h.cfg.Backend.Read(ctx, partition.ReadRequest{Partition: p, Key: key, Consistency: rh.Consistency,
			Epoch: rh.Epoch, Token: rh.Token})
	}
	if err != nil {
		return h.fail(w, r, h.backendError(w, err, write))
	}
	if class := node.ClassifyReply(reply, write); class != node.ReplyOK {
		return h.fail(w, r, h.partitionError(w, reply.Err, class))
	}
	hd := w.Header()
	if write {
		hd.Set(HeaderEpoch, FormatEpoch(max(reply.Token.Epoch, reply.Epoch)))
		hd.Set(HeaderWriteRegion, string(h.cfg.Region))
		hd.Set(HeaderSession, FormatToken(reply.Token))
		w.WriteHeader(http.StatusNoContent)
		return http.StatusNoContent
	}
	if reply.Epoch != 0 {
		hd.Set(HeaderEpoch, FormatEpoch(reply.Epoch))
	}
	if rh.Consistency == partition.Strong {
		hd.Set(HeaderWriteRegion, string(h.cfg.Region)) // only the write region serves a strong read
	}
	if reply.Token != (partition.Token{}) {
		hd.Set(HeaderSession, FormatToken(reply.Token))
	}
	if !reply.Found {
		return h.fail(w, r, errf(http.StatusNotFound, CodeNotFound, "dataapi: key not found in partition %d", p))
	}
	hd.Set(HeaderVersion, FormatToken(reply.Version))
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Content-Length", strconv.Itoa(len(reply.Value)))
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(reply.Value); err != nil {
		h.log.Debug("dataapi: write the response", "err", err)
	}
	return http.StatusOK
}

// parseKey decodes the path-escaped key after PathPrefix: non-empty, at
// most maxKey bytes once unescaped (413 beyond).
func parseKey(esc string, maxKey int) ([]byte, *apiError) {
	if esc == "" {
		return nil, errf(http.StatusBadRequest, CodeBadPath, "dataapi: empty key")
	}
	if len(esc) > 3*maxKey {
		return nil, errf(http.StatusRequestEntityTooLarge, CodeTooLarge, "dataapi: escaped key of %d bytes, bound %d unescaped", len(esc), maxKey)
	}
	s, err := url.PathUnescape(esc)
	if err != nil {
		return nil, errf(http.StatusBadRequest, CodeBadPath, "dataapi: key: %v", err)
	}
	if len(s) > maxKey {
		return nil, errf(http.StatusRequestEntityTooLarge, CodeTooLarge, "dataapi: key of %d bytes, bound %d", len(s), maxKey)
	}
	return []byte(s), nil
}

// readBody reads a PUT's value: at most MaxOpBytes minus the key.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, keyLen int) ([]byte, *apiError) {
	limit := int64(h.cfg.MaxOpBytes - keyLen)
	if r.ContentLength > limit {
		return nil, errf(http.StatusRequestEntityTooLarge, CodeTooLarge, "dataapi: value of %d bytes, bound %d with this key", r.ContentLength, limit)
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit)); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errf(http.StatusRequestEntityTooLarge, CodeTooLarge, "dataapi: value above %d bytes, bound with this key", limit)
		}
		return nil, errf(http.StatusBadRequest, CodeBadBody, "dataapi: read the value: %v", err)
	}
	return buf.Bytes(), nil
}

// backendError maps the backend's own error (not the partition's reply).
func (h *Handler) backendError(w http.ResponseWriter, err error, write bool) *apiError {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		if write {
			return errf(http.StatusGatewayTimeout, CodeTimeout, "dataapi: no reply within %v; the write's outcome is unknown: %v", h.cfg.RequestTimeout, err)
		}
		return errf(http.StatusGatewayTimeout, CodeTimeout, "dataapi: no reply within %v: %v", h.cfg.RequestTimeout, err)
	case errors.Is(err, context.Canceled):
		return errf(http.StatusServiceUnavailable, CodeCanceled, "dataapi: request canceled: %v", err)
	}
	if ae := h.knownError(w, err); ae != nil {
		return ae
	}
	return errf(http.StatusInternalServerError, CodeInternal, "dataapi: %v", err)
}

// partitionError maps a reply's error: precisely where the partition
// package documents the error, else by the reply's class.
func (h *Handler) partitionError(w http.ResponseWriter, err error, class node.ReplyClass) *apiError {
	if ae := h.knownError(w, err); ae != nil {
		return ae
	}
	if class == node.ReplyRetry {
		return &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable, retry: true, msg: err.Error()}
	}
	// node.ReplyUnknown: a write that failed in an unforeseen way may have
	// been applied; the client must not retry it blindly.
	return errf(http.StatusGatewayTimeout, CodeUnknownOutcome, "%v", err)
}

// knownError maps the partition errors with a documented meaning (nil if
// err is none of them), setting their headers.
func (h *Handler) knownError(w http.ResponseWriter, err error) *apiError {
	var (
		rd *partition.RedirectError
		uo *partition.UnknownOutcomeError
		cf *partition.ConditionFailedError
	)
	retry := func(status int, code string) *apiError {
		return &apiError{status: status, code: code, retry: true, msg: err.Error()}
	}
	switch {
	case errors.As(err, &rd):
		hd := w.Header()
		hd.Set(HeaderPartition, rd.Partition.String())
		hd.Set(HeaderEpoch, FormatEpoch(rd.Epoch))
		if rd.WriteRegion != "" {
			hd.Set(HeaderWriteRegion, string(rd.WriteRegion))
		}
		if s := FormatReason(rd.Reason); s != "" {
			hd.Set(HeaderRedirectReason, s)
		}
		h.m.redirects.Inc()
		return &apiError{status: http.StatusMisdirectedRequest, code: CodeRedirect, msg: err.Error()}
	case errors.As(err, &uo):
		hd := w.Header()
		hd.Set(HeaderEpoch, FormatEpoch(uo.Epoch))
		if uo.WriteRegion != "" {
			hd.Set(HeaderWriteRegion, string(uo.WriteRegion))
		}
		hd.Set(HeaderWriteToken, FormatToken(uo.Token))
		return errf(http.StatusGatewayTimeout, CodeUnknownOutcome, "%v", err)
	case errors.As(err, &cf):
		// Not applied: the key's state, committed, did not satisfy the
		// condition. Fm-Version is its version (absent: no value).
		hd := w.Header()
		hd.Set(HeaderPartition, cf.Partition.String())
		if cf.Found {
			hd.Set(HeaderVersion, FormatToken(cf.Version))
		}
		return errf(http.StatusPreconditionFailed, CodeConditionFailed, "%v", err)
	case errors.Is(err, partition.ErrUnknownOutcome):
		return errf(http.StatusGatewayTimeout, CodeUnknownOutcome, "%v", err)
	case errors.Is(err, partition.ErrTooLarge):
		return errf(http.StatusRequestEntityTooLarge, CodeTooLarge, "%v", err)
	case errors.Is(err, partition.ErrBadRequest):
		return errf(http.StatusBadRequest, CodeBadRequest, "%v", err)
	case errors.Is(err, partition.ErrBackpressure):
		return retry(http.StatusTooManyRequests, CodeBackpressure)
	case errors.Is(err, partition.ErrLeaseExpired):
		return retry(http.StatusServiceUnavailable, CodeLeaseExpired)
	case errors.Is(err, partition.ErrNotReady):
		return retry(http.StatusServiceUnavailable, CodeNotReady)
	case errors.Is(err, partition.ErrNotFresh), errors.Is(err, partition.ErrSessionUnavailable):
		return retry(http.StatusServiceUnavailable, CodeStale)
	case errors.Is(err, partition.ErrStalenessBound):
		// The write was held and not applied (partition.StalenessError).
		return retry(http.StatusServiceUnavailable, CodeStalenessBound)
	case errors.Is(err, partition.ErrUnknownPartition):
		return errf(http.StatusNotFound, CodeUnknownPartition, "%v", err)
	}
	return nil
}

// fail writes an error response and returns its status.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, ae *apiError) int {
	msg := ae.msg
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText]
	}
	body, err := json.Marshal(ErrorBody{Error: msg, Code: ae.code})
	if err != nil { // cannot happen: two strings
		body = []byte(`{"error":"dataapi: encode the error","code":"internal"}`)
	}
	body = append(body, '\n')
	hd := w.Header()
	if ae.retry {
		hd.Set("Retry-After", h.retryAfter)
	}
	hd.Set("Content-Type", "application/json")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(ae.status)
	if _, err := w.Write(body); err != nil {
		h.log.Debug("dataapi: write the error response", "err", err)
	}
	h.m.errors.WithLabelValues(ae.code).Inc()
	lvl := slog.LevelDebug // the client's mistakes and the retryable states
	if ae.status == http.StatusInternalServerError || ae.status == http.StatusGatewayTimeout {
		lvl = slog.LevelWarn
	}
	h.log.Log(r.Context(), lvl, "dataapi: request failed", "method", r.Method, "status", ae.status, "code", ae.code, "err", msg)
	return ae.status
}
